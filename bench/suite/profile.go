package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// profile bounds a run: which sizes each scenario measures, how often, and
// for how long the data-path load runs.
type profile struct {
	Name       string
	Reps       int
	ScaleReps  int           // scenario 1's repetitions; Reps if 0
	Scale      []size        // scenario 1
	Change     []size        // scenario 2
	DataPath   []int         // scenario 3: policies selecting other pods
	LoadFor    time.Duration // scenario 3: per direction and protocol
	DPReps     int           // scenario 3: repetitions (labs); Reps if 0
	MicroBench string        // scenario 5: -bench pattern ("" skips)
	MicroTime  string        // scenario 5: -benchtime ("" = go test's default)
	Churn      int           // scenario 4: pod changes after the first sync (0 skips)
	// Scenario 6, the denied-traffic log: allowed traffic with logging
	// on vs off at DeniedPolicies (0 skips the scenario), and the agent's
	// CPU at each log rate of DeniedRates, DeniedFor per window.
	DeniedPolicies int
	DeniedRates    []int
	DeniedFor      time.Duration
	// Scenario 4's cluster: 10k pods / 1k policies on 100 nodes unless
	// set; MemoryOnly runs scenario 4 alone with the envelope's
	// compiler side.
	MemorySize  size
	MemoryNodes int
	MemoryOnly  bool
	// Scenario 7, ClusterNetworkPolicies (cnp.go): no CNPs skips it.
	CNP cnpSpec
	// Scenario 8, egress SNAT through `nftguard run` (egress.go): no runs
	// skips it.
	Egress egressSpec
	// Scenario 9, domainNames (domains.go): no sizes skip it.
	Domains domainsSpec
}

var (
	s1k  = size{Pods: 1000, Policies: 100}
	s10k = size{Pods: 10000, Policies: 1000}
	s50k = size{Pods: 50000, Policies: 5000}
)

// profiles returns the named profile: full for `make bench`, quick for
// regular use (< 5 min), smoke to keep the program working in CI (< 60 s),
// envelope on demand only (the compilers' bytes per pod and
// per-event cost at 1k-150k pods, envelope_compile.go, then scenario 4 at
// 150k pods over 5,000 Nodes, 30 on the agent's node, 10k policies; 20-30
// minutes, most of it creating the objects; $BENCH_ENVELOPE_PODS picks a
// smaller point of the same shape for scenario 4, with a policy per 15
// pods).
func profiles(name string) (profile, error) {
	switch name {
	case "full":
		return profile{Name: name, Reps: 3, ScaleReps: 5, Scale: []size{s1k, s10k, s50k}, Change: []size{s1k, s10k, s50k},
			DataPath: []int{0, 100, 1000, 10000}, LoadFor: 4 * time.Second, DPReps: 5, MicroBench: ".", Churn: 3600,
			DeniedPolicies: 1000, DeniedRates: []int{1000, 5000}, DeniedFor: 10 * time.Second,
			CNP:    cnpSpec{Size: s10k, Admin: 100, Baseline: 100},
			Egress: egressSpec{Size: s10k, Runs: 100},
			Domains: domainsSpec{Addrs: []int{10, 1000, 10000}, LoadFor: 3 * time.Second, Reps: 5, Names: 10000, PerName: 10, MemReps: 3,
				FwdQueries: 3000, FwdReps: 2, RatePods: 4, RateClients: 8, RateFor: 5 * time.Second}}, nil
	case "quick":
		return profile{Name: name, Reps: 3, ScaleReps: 5, Scale: []size{s1k, s10k}, Change: []size{s1k, s10k},
			DataPath: []int{0, 100, 1000}, LoadFor: 2 * time.Second, MicroBench: "Compile50k|OneChange", MicroTime: "1x", Churn: 1200,
			DeniedPolicies: 1000, DeniedRates: []int{1000}, DeniedFor: 5 * time.Second,
			CNP:    cnpSpec{Size: s1k, Admin: 20, Baseline: 20},
			Egress: egressSpec{Size: s1k, Runs: 30},
			Domains: domainsSpec{Addrs: []int{10, 1000}, LoadFor: 300 * time.Millisecond, Reps: 1, Names: 1000, PerName: 10, MemReps: 1,
				FwdQueries: 300, FwdReps: 1, RatePods: 4, RateClients: 8, RateFor: time.Second}}, nil
	case "envelope":
		pods := 150000
		if v := os.Getenv("BENCH_ENVELOPE_PODS"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1500 {
				return profile{}, fmt.Errorf("BENCH_ENVELOPE_PODS=%q: want a number of pods ≥ 1500", v)
			}
			pods = n
		}
		return profile{Name: name, Reps: 1, Churn: 3600, MemorySize: size{Pods: pods, Policies: pods / 15},
			MemoryNodes: pods / 30, MemoryOnly: true}, nil
	case "smoke":
		tiny := size{Pods: 500, Policies: 50}
		return profile{Name: name, Reps: 1, Scale: []size{tiny}, Change: []size{tiny},
			DataPath: []int{0, 20}, LoadFor: 500 * time.Millisecond,
			DeniedPolicies: 20, // the agent-CPU part (an API server, a build) would double the smoke run
			CNP:            cnpSpec{Size: tiny, Admin: 5, Baseline: 5},
			Domains: domainsSpec{Addrs: []int{10}, LoadFor: 200 * time.Millisecond, Reps: 1, Names: 100, PerName: 10, MemReps: 1,
				FwdQueries: 20, FwdReps: 1, RatePods: 2, RateClients: 2, RateFor: 200 * time.Millisecond}}, nil
	}
	return profile{}, fmt.Errorf("unknown profile %q (full, quick, smoke or envelope)", name)
}

// scaleReps is how often scenario 1 runs each tool at each size: apply
// at scale is judged on a ratio of medians, which three noisy repetitions
// do not pin down.
func (p profile) scaleReps() int {
	if p.ScaleReps == 0 {
		return p.Reps
	}
	return p.ScaleReps
}

// dpReps is how many labs scenario 3 measures in.
func (p profile) dpReps() int {
	if p.DPReps == 0 {
		return p.Reps
	}
	return p.DPReps
}
