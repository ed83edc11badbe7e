package main

import (
	"maps"
	"slices"

	"github.com/nftguard/nftguard/podset"
)

// The API-load measurement (apiload_test.go) asks of every pod
// watch event whether it changed anything the agent keeps. The agent keeps
// podset records; these helpers compare and size them without depending
// on the agent's unexported code.

// recordFields are the record fields compared, in report order.
var recordFields = []string{"namespace", "name", "uid", "labels", "node", "ips", "ports", "hostNetwork", "finished"}

// recordDiff names the fields in which b differs from a. A nil record
// (no pod) differs from any record in every field.
func recordDiff(a, b *podset.Pod) []string {
	if a == nil || b == nil {
		if a == b {
			return nil
		}
		return recordFields
	}
	var out []string
	add := func(changed bool, name string) {
		if changed {
			out = append(out, name)
		}
	}
	add(a.Namespace != b.Namespace, "namespace")
	add(a.Name != b.Name, "name")
	add(a.UID != b.UID, "uid")
	// A nil and an empty map select the same: the agent cannot tell them
	// apart either.
	add(!maps.Equal(a.Labels, b.Labels), "labels")
	add(a.NodeName != b.NodeName, "node")
	add(!slices.Equal(a.IPs, b.IPs), "ips")
	add(!slices.Equal(a.Ports, b.Ports), "ports")
	add(a.HostNetwork != b.HostNetwork, "hostNetwork")
	add(a.Finished != b.Finished, "finished")
	return out
}

// compactLen is the length of a plain encoding of the record: every
// string length-prefixed (a varint), counts as varints, port numbers as
// two bytes, the two flags as one byte. It is what a feed that sent only
// the record would carry per pod, before any framing or compression.
func compactLen(p *podset.Pod) int {
	str := func(s string) int { return uvarintLen(uint64(len(s))) + len(s) }
	n := str(p.Namespace) + str(p.Name) + str(string(p.UID)) + str(p.NodeName)
	n += uvarintLen(uint64(len(p.Labels)))
	for k, v := range p.Labels {
		n += str(k) + str(v)
	}
	n += uvarintLen(uint64(len(p.IPs)))
	for _, ip := range p.IPs {
		n += str(ip)
	}
	n += uvarintLen(uint64(len(p.Ports)))
	for _, pt := range p.Ports {
		n += str(pt.Name) + str(string(pt.Protocol)) + 2
	}
	return n + 1 // hostNetwork and finished
}

// deleteLen is what a feed needs to remove a record: its key.
func deleteLen(p *podset.Pod) int {
	str := func(s string) int { return uvarintLen(uint64(len(s))) + len(s) }
	return str(p.Namespace) + str(p.Name)
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}
