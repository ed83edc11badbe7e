// Package egresslat is the record of one run of e2e's
// TestAgentEgressLatency: egress SNAT latencies measured on a node's
// kernel table through `nftguard run`. The test writes it as JSON
// (-egress.out) and bench/suite's egress scenario reads it, so the
// measurement is written once and the benchmark reports what the test
// measured.
package egresslat

import "slices"

// Result is one run. Times are milliseconds, in the order measured.
type Result struct {
	// The load written before measuring (all 0: the lab's pods only).
	Pods     int `json:"pods"`
	Policies int `json:"policies"`
	Nodes    int `json:"nodes"`
	// Runs is the number of measurements of each kind asked for.
	Runs int `json:"runs"`

	// A selected pod's address written to the API → its SNAT map entry.
	AddressToSNAT []float64 `json:"address_to_snat_ms"`
	// The Service's address removed from the node's lo → the selected
	// pod's address held; added back → translated again.
	LostToHeld   []float64 `json:"lost_to_held_ms"`
	GainedToSNAT []float64 `json:"gained_to_snat_ms"`
	// TCP connection setup of a pod whose address is known, not
	// selected, to the external host, with the pod-start guard off / on.
	ConnectGuardOff []float64 `json:"connect_guard_off_ms"`
	ConnectGuardOn  []float64 `json:"connect_guard_on_ms"`

	// The agent's own view of the address changes:
	// nftguard_event_to_kernel_seconds{kind="LocalAddress"}.
	LocalAddressChanges int     `json:"local_address_changes"`
	LocalAddressAvgMs   float64 `json:"local_address_avg_ms"`
}

// Quantile is the q-quantile (0 ≤ q ≤ 1) of xs by nearest rank: the value
// at index ⌊q·n⌋ of the sorted values, the last one for q = 1, so that the
// p99 of 100 values is their maximum (not an interpolation below it). It
// is 0 for no values.
func Quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	i := int(q * float64(len(s)))
	return s[min(max(i, 0), len(s)-1)]
}
