package budget

import "testing"

// TestEstimate pins the cost model, rule by rule of the layout it mirrors.
func TestEstimate(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Shape
		want Cost
	}{
		{"no rules: the chains of its pods", Shape{LocalPods: 3, Directions: 2}, Cost{3 * 2 * 7, 12}},
		{"no local pods: nothing", Shape{Directions: 1, Rules: []RuleShape{{SelectorPeers: 1, SelectedAddrs: 50}}}, Cost{}},
		{"allow all", Shape{LocalPods: 10, Directions: 1, Rules: []RuleShape{{}}}, Cost{1 + 10*7, 20}},
		// A port is an interval of two elements in the kernel, each
		// port set (one per protocol) and ipBlock set (one per family)
		// one more: the zero sentinel.
		{"ports are one set per protocol, once per policy", Shape{LocalPods: 10, Directions: 1,
			Rules: []RuleShape{{Ports: 5000, SelectorPeers: 1, IPBlocks: 1, SelectedAddrs: 7, Excepts: 2}}},
			Cost{4*3 + 10*7, 2*5000 + 3 + 2*3 + 2 + 7 + 20}},
		{"ingress named ports resolve per pod", Shape{LocalPods: 2, Directions: 1,
			Rules: []RuleShape{{Ports: 1, NamedPorts: 2, SelectorPeers: 1, SelectedAddrs: 4}}}, Cost{2*1 + 2*2*2 + 2*7, 2*1 + 1 + 2 + 4 + 4}},
		{"egress named ports: peers × names", Shape{LocalPods: 2, Directions: 1,
			Rules: []RuleShape{{Egress: true, NamedPorts: 3, SelectorPeers: 2, SelectedAddrs: 100}}}, Cost{2 + 2*7, 3 + 100 + 300 + 4}},
		{"egress named ports without peers: every pod", Shape{LocalPods: 1, Directions: 1,
			Rules: []RuleShape{{Egress: true, NamedPorts: 2, Ports: 1, AllAddrs: 1000}}}, Cost{1 + 2 + 7, 2*1 + 1 + 2 + 2000 + 2}},
		{"rules of one selection share its set", Shape{LocalPods: 1, Directions: 1,
			Rules: []RuleShape{{SelectorPeers: 1, SelectedAddrs: 50, Selection: "s"}, {SelectorPeers: 1, SelectedAddrs: 50, Selection: "s", Ports: 1}}},
			Cost{2 + 2 + 7, 50 + 2*1 + 1 + 2}},
	} {
		if got := Estimate(tc.s); got != tc.want {
			t.Errorf("%s: Estimate = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
