package podchain

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nftguard/nftguard/podset"
)

func TestPortMatches(t *testing.T) {
	setName := func(proto string) string { return "r_" + proto }
	cases := []struct {
		name    string
		entries []PortEntry
		want    []string
		sets    map[string][]string
	}{
		{name: "no entries: no matches (named ports only)"},
		{name: "one port inline", entries: []PortEntry{{Proto: "tcp", From: 80, To: 80}}, want: []string{"tcp dport 80"}},
		{name: "touching and overlapping ranges merge to one inline range",
			entries: []PortEntry{{Proto: "tcp", From: 81, To: 81}, {Proto: "tcp", From: 80, To: 80}, {Proto: "tcp", From: 82, To: 90}, {Proto: "tcp", From: 85, To: 86}},
			want:    []string{"tcp dport 80-90"}},
		{name: "several ranges: one interval set, by number",
			entries: []PortEntry{{Proto: "tcp", From: 443, To: 443}, {Proto: "tcp", From: 80, To: 90}, {Proto: "tcp", From: 8080, To: 8080}},
			want:    []string{"tcp dport @r_tcp"}, sets: map[string][]string{"r_tcp": {"80-90", "443", "8080"}}},
		{name: "protocols in first-appearance order",
			entries: []PortEntry{{Proto: "udp", From: 53, To: 53}, {Proto: "tcp", From: 80, To: 80}, {Proto: "udp", From: 5353, To: 5353}},
			want:    []string{"udp dport @r_udp", "tcp dport 80"}, sets: map[string][]string{"r_udp": {"53", "5353"}}},
		{name: "a protocol without a number covers its numbered ports",
			entries: []PortEntry{{Proto: "sctp", From: 9, To: 9}, {Proto: "sctp", All: true}, {Proto: "sctp", From: 10, To: 20}},
			want:    []string{"meta l4proto sctp"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCycle(nil, nil, false)
			got := c.PortMatches(tc.entries, setName, "comment")
			if !slices.Equal(got, tc.want) {
				t.Errorf("matches %q, want %q", got, tc.want)
			}
			sets := c.Sets()
			if len(sets) != len(tc.sets) {
				t.Fatalf("sets %v, want %v", sets, tc.sets)
			}
			for _, s := range sets {
				var elems []string
				for _, e := range s.Elements {
					elems = append(elems, e.Key)
				}
				if !slices.Equal(elems, tc.sets[s.Name]) || s.Type != "inet_service" || !s.Interval {
					t.Errorf("set %s %s interval=%v %q, want an inet_service interval set of %q", s.Name, s.Type, s.Interval, elems, tc.sets[s.Name])
				}
			}
		})
	}
}

// A second rule naming the same port set (two policies of one key, in
// manifests only) keeps the first's set and is marked for compiling
// again next time.
func TestPortSetNameTaken(t *testing.T) {
	c := NewCycle(nil, nil, false)
	two := []PortEntry{{Proto: "tcp", From: 1, To: 1}, {Proto: "tcp", From: 3, To: 3}}
	c.PortMatches(two, func(string) string { return "same" }, "first")
	c.scratch = scratch{}
	c.PortMatches([]PortEntry{{Proto: "tcp", From: 5, To: 5}, {Proto: "tcp", From: 7, To: 7}}, func(string) string { return "same" }, "second")
	if !c.scratch.collided {
		t.Error("the second declarer is not marked collided")
	}
	if s := c.Sets(); len(s) != 1 || s[0].Comment != "first" {
		t.Errorf("sets %v, want the first declarer's", s)
	}
}

func TestNamedPortsResolve(t *testing.T) {
	pod := &podset.Pod{Ports: []podset.Port{
		{Name: "web", Protocol: corev1.ProtocolTCP, Number: 8080},
		{Name: "web", Protocol: corev1.ProtocolTCP, Number: 9090}, // a later one of the same name and protocol: not it
		{Name: "dns", Protocol: corev1.ProtocolUDP, Number: 53},
		{Name: "dns", Protocol: corev1.ProtocolTCP, Number: 53},
		{Name: "other", Protocol: corev1.ProtocolTCP, Number: 1},
	}}
	n := NewNamedPorts([]NamedPort{{"web", corev1.ProtocolTCP}, {"dns", corev1.ProtocolUDP}, {"dns", corev1.ProtocolTCP}, {"missing", corev1.ProtocolTCP}})
	got := n.Matches(pod)
	want := []string{"tcp dport 8080", "udp dport 53", "tcp dport 53"}
	if !slices.Equal(got, want) {
		t.Errorf("matches %q, want %q", got, want)
	}
	for _, p := range pod.Ports {
		if want, _ := pod.NamedPort(p.Name, &p.Protocol); n[NamedPort{p.Name, p.Protocol}] {
			found := false
			n.Resolve(pod, func(proto corev1.Protocol, port int32) {
				found = found || (proto == p.Protocol && port == want)
			})
			if !found {
				t.Errorf("%s/%s: Resolve does not give %d, which podset.Pod.NamedPort does", p.Name, p.Protocol, want)
			}
		}
	}
}
