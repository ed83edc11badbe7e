package fqdn

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
)

var (
	podV4    = netip.MustParseAddr("10.0.0.1")
	podV6    = netip.MustParseAddr("fd00::1")
	only4    = netip.MustParseAddr("10.0.0.2")
	only6    = netip.MustParseAddr("fd00::3")
	stranger = netip.MustParseAddr("10.0.0.9")
)

func testTable() (*Table, *Rule, *Rule) {
	web := &Rule{Policy: "web", Index: 0, Patterns: []Pattern{{Domain: "a.example"}, {Domain: "a.example", Wildcard: true}}, Set4: "web4", Set6: "web6"}
	api := &Rule{Policy: "api", Index: 2, Patterns: []Pattern{{Domain: "api.a.example"}}, Set4: "api4", Set6: "api6"}
	wild := &Rule{Policy: "wild", Index: 1, Patterns: []Pattern{{Domain: "w.example", Wildcard: true}}, Set4: "wild4", Set6: "wild6"}
	dual := &Subject{Addrs: [2]netip.Addr{podV4, podV6}, Rules: []*Rule{web, api}}
	return &Table{
		Pods: map[netip.Addr]*Subject{
			podV4: dual, podV6: dual,
			only4: {Addrs: [2]netip.Addr{only4, {}}, Rules: []*Rule{web}},
			only6: {Addrs: [2]netip.Addr{{}, only6}, Rules: []*Rule{web, wild}},
		},
		Servers: []netip.AddrPort{netip.MustParseAddrPort("10.96.0.10:53")},
	}, web, api
}

func rr(t *testing.T, s string) dns.RR {
	t.Helper()
	r, err := dns.NewRR(s)
	if err != nil {
		t.Fatalf("NewRR(%q): %v", s, err)
	}
	return r
}

// answer is a NOERROR response to one IN question, with the records given
// in zone-file form.
func answer(t *testing.T, qname string, qtype uint16, records ...string) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(qname, qtype)
	r := new(dns.Msg)
	r.SetReply(m)
	for _, s := range records {
		r.Answer = append(r.Answer, rr(t, s))
	}
	return r
}

// elem is a compact form of a match for comparisons.
type elem struct {
	Rule string
	Set  string
	Key  string
	TTL  time.Duration
	Name string
}

func elems(res Result) []elem {
	var out []elem
	for _, m := range res.Matches {
		out = append(out, elem{Rule: fmt.Sprintf("%s/%d", m.Rule.Policy, m.Rule.Index), Set: m.Set, Key: m.Key, TTL: m.TTL, Name: m.Name})
	}
	return out
}

func TestElements(t *testing.T) {
	tab, _, _ := testTable()
	tests := []struct {
		name    string
		pod     netip.Addr
		msg     func(t *testing.T) *dns.Msg
		want    []elem
		ignored string
		over    int
		noPod   int
	}{{
		name: "A record of the plain name",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, "a.example.", dns.TypeA, "a.example. 60 IN A 192.0.2.7")
		},
		want: []elem{{"web/0", "web4", "10.0.0.1 . 192.0.2.7", 60 * time.Second, "a.example"}},
	}, {
		name: "upper case question and owner, the pattern still matches",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, "A.EXAMPLE.", dns.TypeA, "a.Example. 60 IN A 192.0.2.7")
		},
		want: []elem{{"web/0", "web4", "10.0.0.1 . 192.0.2.7", 60 * time.Second, "a.example"}},
	}, {
		name: "AAAA asked over IPv4 is keyed by the pod's IPv6 address",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, "x.a.example.", dns.TypeAAAA, "x.a.example. 30 IN AAAA 2001:db8::7")
		},
		want: []elem{{"web/0", "web6", "fd00::1 . 2001:db8::7", 30 * time.Second, "x.a.example"}},
	}, {
		name: "A asked over IPv6 is keyed by the pod's IPv4 address",
		pod:  podV6,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, "x.y.a.example.", dns.TypeA, "x.y.a.example. 30 IN A 192.0.2.8")
		},
		want: []elem{{"web/0", "web4", "10.0.0.1 . 192.0.2.8", 30 * time.Second, "x.y.a.example"}},
	}, {
		name: "a name two rules match adds to both rules' sets",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, "api.a.example.", dns.TypeA, "api.a.example. 60 IN A 192.0.2.1", "api.a.example. 60 IN A 192.0.2.2")
		},
		want: []elem{
			{"web/0", "web4", "10.0.0.1 . 192.0.2.1", time.Minute, "api.a.example"},
			{"web/0", "web4", "10.0.0.1 . 192.0.2.2", time.Minute, "api.a.example"},
			{"api/2", "api4", "10.0.0.1 . 192.0.2.1", time.Minute, "api.a.example"},
			{"api/2", "api4", "10.0.0.1 . 192.0.2.2", time.Minute, "api.a.example"},
		},
	}, {
		name: "CNAME chain: the smallest TTL along it, records off the chain ignored",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, "www.a.example.", dns.TypeA,
				"www.a.example. 300 IN CNAME edge.cdn.example.",
				"edge.cdn.example. 20 IN CNAME e1.cdn.example.",
				"e1.cdn.example. 600 IN A 198.51.100.1",
				"e1.cdn.example. 10 IN A 198.51.100.2",
				"other.example. 600 IN A 203.0.113.66",     // not reached from the question
				"edge.cdn.example. 600 IN A 203.0.113.67",  // an owner with a CNAME has no other data
				"www.a.example. 600 IN A 203.0.113.68",     // the same
				"e1.cdn.example. 600 IN AAAA 2001:db8::66", // not what was asked
			)
		},
		want: []elem{
			{"web/0", "web4", "10.0.0.1 . 198.51.100.1", 20 * time.Second, "e1.cdn.example"},
			{"web/0", "web4", "10.0.0.1 . 198.51.100.2", 10 * time.Second, "e1.cdn.example"},
		},
	}, {
		name: "CNAME records in any order",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, "www.a.example.", dns.TypeA,
				"c.example. 60 IN A 198.51.100.3",
				"b.example. 60 IN CNAME c.example.",
				"www.a.example. 60 IN CNAME b.example.",
			)
		},
		want: []elem{{"web/0", "web4", "10.0.0.1 . 198.51.100.3", time.Minute, "c.example"}},
	}, {
		name: "the pattern is matched against the question, not the chain's end",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, "evil.example.", dns.TypeA,
				"evil.example. 60 IN CNAME a.example.",
				"a.example. 60 IN A 198.51.100.4",
			)
		},
		ignored: IgnoredNoMatch,
	}, {
		name: "TTL 0 lives MinTTL",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, "a.example.", dns.TypeA, "a.example. 0 IN A 192.0.2.7")
		},
		want: []elem{{"web/0", "web4", "10.0.0.1 . 192.0.2.7", MinTTL, "a.example"}},
	}, {
		name: "a huge TTL lives MaxTTL",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, "a.example.", dns.TypeA, "a.example. 4294967295 IN A 192.0.2.7")
		},
		want: []elem{{"web/0", "web4", "10.0.0.1 . 192.0.2.7", MaxTTL, "a.example"}},
	}, {
		name: "a repeated address once, with its longest TTL",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, "a.example.", dns.TypeA, "a.example. 10 IN A 192.0.2.7", "a.example. 90 IN A 192.0.2.7")
		},
		want: []elem{{"web/0", "web4", "10.0.0.1 . 192.0.2.7", 90 * time.Second, "a.example"}},
	}, {
		name: "ANY takes both families",
		pod:  podV6,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, "a.example.", dns.TypeANY, "a.example. 60 IN A 192.0.2.7", "a.example. 60 IN AAAA 2001:db8::7", "a.example. 60 IN MX 10 mx.a.example.")
		},
		want: []elem{
			{"web/0", "web4", "10.0.0.1 . 192.0.2.7", time.Minute, "a.example"},
			{"web/0", "web6", "fd00::1 . 2001:db8::7", time.Minute, "a.example"},
		},
	}, {
		name: "an IPv4-mapped AAAA is not an IPv6 destination",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, "a.example.", dns.TypeAAAA, "a.example. 60 IN AAAA ::ffff:192.0.2.7")
		},
		ignored: IgnoredNoAddress,
	}, {
		name: "an IPv4-only pod gets nothing from AAAA records",
		pod:  only4,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, "a.example.", dns.TypeAAAA, "a.example. 60 IN AAAA 2001:db8::7")
		},
		ignored: IgnoredNoAddress,
		noPod:   1,
	}, {
		name: "an IPv6-only pod gets nothing from A records",
		pod:  only6,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, "a.example.", dns.TypeA, "a.example. 60 IN A 192.0.2.7")
		},
		ignored: IgnoredNoAddress,
		noPod:   1,
	}, {
		name: "not a subject",
		pod:  stranger,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, "a.example.", dns.TypeA, "a.example. 60 IN A 192.0.2.7")
		},
		ignored: IgnoredNotSubject,
	}, {
		name: "a name no pattern matches",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, "kubernetes.default.svc.cluster.local.", dns.TypeA, "kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1")
		},
		ignored: IgnoredNoMatch,
	}, {
		name: "an escaped dot is inside a label: evil\\.w.example is no name under w.example",
		pod:  only6,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, `evil\.w.example.`, dns.TypeAAAA, `evil\.w.example. 60 IN AAAA 2001:db8::7`)
		},
		ignored: IgnoredNoMatch,
	}, {
		name: "an escaped backslash is a label of its own: \\\\.w.example is under w.example",
		pod:  only6,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, `\\.w.example.`, dns.TypeAAAA, `\\.W.example. 60 IN AAAA 2001:db8::7`)
		},
		want: []elem{{"wild/1", "wild6", "fd00::3 . 2001:db8::7", 60 * time.Second, `\092.w.example`}},
	}, {
		name: "a CNAME to a name with an escaped dot is followed label by label",
		pod:  only6,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, "x.w.example.", dns.TypeAAAA, `x.w.example. 60 IN CNAME a\.b.example.`, `a.b.example. 60 IN AAAA 2001:db8::8`, `A\.B.example. 60 IN AAAA 2001:db8::9`)
		},
		want: []elem{{"wild/1", "wild6", "fd00::3 . 2001:db8::9", 60 * time.Second, `a\046b.example`}},
	}, {
		name: "a wildcard alone does not match its own domain",
		pod:  only6,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, "w.example.", dns.TypeAAAA, "w.example. 60 IN AAAA 2001:db8::7")
		},
		ignored: IgnoredNoMatch,
	}, {
		name: "a wildcard alone matches a name below its domain",
		pod:  only6,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, "x.w.example.", dns.TypeAAAA, "x.w.example. 60 IN AAAA 2001:db8::7")
		},
		want: []elem{{"wild/1", "wild6", "fd00::3 . 2001:db8::7", time.Minute, "x.w.example"}},
	}, {
		name: "NXDOMAIN",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			m := answer(t, "a.example.", dns.TypeA, "a.example. 60 IN A 192.0.2.7")
			m.Rcode = dns.RcodeNameError
			return m
		},
		ignored: IgnoredRcode,
	}, {
		name: "truncated",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			m := answer(t, "a.example.", dns.TypeA, "a.example. 60 IN A 192.0.2.7")
			m.Truncated = true
			return m
		},
		ignored: IgnoredTruncated,
	}, {
		name: "a query, not a response",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			m := answer(t, "a.example.", dns.TypeA, "a.example. 60 IN A 192.0.2.7")
			m.Response = false
			return m
		},
		ignored: IgnoredNotResponse,
	}, {
		name: "two questions",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			m := answer(t, "a.example.", dns.TypeA, "a.example. 60 IN A 192.0.2.7")
			m.Question = append(m.Question, m.Question[0])
			return m
		},
		ignored: IgnoredQuestion,
	}, {
		name: "no question",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			m := answer(t, "a.example.", dns.TypeA, "a.example. 60 IN A 192.0.2.7")
			m.Question = nil
			return m
		},
		ignored: IgnoredQuestion,
	}, {
		name: "class CHAOS",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			m := answer(t, "a.example.", dns.TypeA, "a.example. 60 IN A 192.0.2.7")
			m.Question[0].Qclass = dns.ClassCHAOS
			return m
		},
		ignored: IgnoredQuestion,
	}, {
		name: "a question for MX",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, "a.example.", dns.TypeMX, "a.example. 60 IN A 192.0.2.7")
		},
		ignored: IgnoredQtype,
	}, {
		name: "a CNAME loop",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, "a.example.", dns.TypeA,
				"a.example. 60 IN CNAME b.example.",
				"b.example. 60 IN CNAME a.example.",
				"b.example. 60 IN A 192.0.2.7",
			)
		},
		ignored: IgnoredChain,
	}, {
		name: "a CNAME to itself",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			return answer(t, "a.example.", dns.TypeA, "a.example. 60 IN CNAME A.example.", "a.example. 60 IN A 192.0.2.7")
		},
		ignored: IgnoredChain,
	}, {
		name: "a chain of MaxChain CNAMEs is followed",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			return chain(t, MaxChain)
		},
		want: []elem{{"web/0", "web4", "10.0.0.1 . 192.0.2.7", time.Minute, fmt.Sprintf("c%d.example", MaxChain)}},
	}, {
		name: "a chain of MaxChain+1 CNAMEs is cut",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			return chain(t, MaxChain+1)
		},
		ignored: IgnoredChain,
	}, {
		name: "addresses beyond MaxAddrsPerAnswer are counted, not added",
		pod:  podV4,
		msg: func(t *testing.T) *dns.Msg {
			m := answer(t, "a.example.", dns.TypeA)
			for i := range MaxAddrsPerAnswer + 10 {
				m.Answer = append(m.Answer, rr(t, fmt.Sprintf("a.example. 60 IN A 10.%d.%d.%d", i>>16, (i>>8)&255, i&255)))
			}
			return m
		},
		over: 10,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := tab.Elements(tt.pod, tt.msg(t))
			if res.Ignored != tt.ignored {
				t.Errorf("Ignored = %q, want %q", res.Ignored, tt.ignored)
			}
			if res.OverLimit != tt.over || res.NoPodAddr != tt.noPod {
				t.Errorf("OverLimit, NoPodAddr = %d, %d; want %d, %d", res.OverLimit, res.NoPodAddr, tt.over, tt.noPod)
			}
			if tt.over > 0 {
				if len(res.Matches) != MaxAddrsPerAnswer {
					t.Errorf("%d matches, want %d", len(res.Matches), MaxAddrsPerAnswer)
				}
				return
			}
			if diff := cmp.Diff(tt.want, elems(res)); diff != "" {
				t.Errorf("elements (-want +got):\n%s", diff)
			}
		})
	}
}

// chain answers c0.a.example with n CNAMEs (c0.a.example → c1.example →
// ... → cN.example) and an A record at the end.
func chain(t *testing.T, n int) *dns.Msg {
	m := answer(t, "c0.a.example.", dns.TypeA)
	prev := "c0.a.example."
	for i := 1; i <= n; i++ {
		next := fmt.Sprintf("c%d.example.", i)
		m.Answer = append(m.Answer, rr(t, prev+" 60 IN CNAME "+next))
		prev = next
	}
	m.Answer = append(m.Answer, rr(t, prev+" 60 IN A 192.0.2.7"))
	return m
}

func TestElementsMatchDetails(t *testing.T) {
	tab, web, _ := testTable()
	res := tab.Elements(podV4, answer(t, "x.a.example.", dns.TypeA, "x.a.example. 60 IN A 192.0.2.7"))
	if len(res.Matches) != 1 {
		t.Fatalf("matches %+v", res.Matches)
	}
	m := res.Matches[0]
	if m.Rule != web || m.Pattern != (Pattern{Domain: "a.example", Wildcard: true}) || m.Addr != netip.MustParseAddr("192.0.2.7") || res.Question != "x.a.example" {
		t.Errorf("match %+v, question %q", m, res.Question)
	}
	if got := res.Elements(); len(got) != 1 || got[0] != m.Element {
		t.Errorf("Elements() = %+v", got)
	}
}

func TestElementsNilTable(t *testing.T) {
	var tab *Table
	res := tab.Elements(podV4, answer(t, "a.example.", dns.TypeA, "a.example. 60 IN A 192.0.2.7"))
	if res.Ignored != IgnoredNotSubject || len(res.Matches) != 0 {
		t.Errorf("nil table: %+v", res)
	}
}

func TestTableLookupAndServer(t *testing.T) {
	tab, _, _ := testTable()
	if s := tab.Lookup(netip.MustParseAddr("::ffff:10.0.0.1")); s == nil || s.Addrs[1] != podV6 {
		t.Errorf("an IPv4-mapped source is not found as its IPv4 pod: %+v", s)
	}
	if tab.Lookup(stranger) != nil {
		t.Error("a stranger is a subject")
	}
	tab.Pods[stranger] = &Subject{Addrs: [2]netip.Addr{stranger, {}}}
	if tab.Lookup(stranger) != nil {
		t.Error("a pod without rules is a subject")
	}
	for _, tt := range []struct {
		pod  netip.Addr
		name string
		want bool
	}{
		{podV4, "a.example.", true},
		{podV6, "X.A.Example", true},
		{podV4, "api.a.example", true},
		{podV4, "b.example", false},
		{only6, "w.example", false},
		{only6, "x.w.example.", true},
		{only4, "x.w.example.", false},
		{netip.MustParseAddr("10.0.0.8"), "a.example", false},
	} {
		if got := tab.Wants(tt.pod, tt.name); got != tt.want {
			t.Errorf("Wants(%v, %q) = %v, want %v", tt.pod, tt.name, got, tt.want)
		}
	}
	s4 := netip.MustParseAddrPort("10.96.0.10:53")
	s6 := netip.MustParseAddrPort("[fd00:96::a]:53")
	for _, tt := range []struct {
		servers []netip.AddrPort
		v6      bool
		want    netip.AddrPort
		ok      bool
	}{
		{[]netip.AddrPort{s4, s6}, false, s4, true},
		{[]netip.AddrPort{s4, s6}, true, s6, true},
		{[]netip.AddrPort{s4}, true, s4, true},
		{[]netip.AddrPort{s6}, false, s6, true},
		{nil, false, netip.AddrPort{}, false},
	} {
		tab.Servers = tt.servers
		got, ok := tab.Server(tt.v6)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Server(v6=%v) of %v = %v, %v; want %v, %v", tt.v6, tt.servers, got, ok, tt.want, tt.ok)
		}
	}
}

func BenchmarkElements(b *testing.B) {
	tab, _, _ := testTable()
	m := new(dns.Msg)
	m.SetQuestion("www.a.example.", dns.TypeA)
	r := new(dns.Msg)
	r.SetReply(m)
	c, _ := dns.NewRR("www.a.example. 300 IN CNAME edge.cdn.example.")
	r.Answer = append(r.Answer, c)
	for i := range 8 {
		a, _ := dns.NewRR(fmt.Sprintf("edge.cdn.example. 60 IN A 198.51.100.%d", i))
		r.Answer = append(r.Answer, a)
	}
	b.ReportAllocs()
	for b.Loop() {
		if res := tab.Elements(podV4, r); len(res.Matches) != 8 {
			b.Fatal(res)
		}
	}
}
