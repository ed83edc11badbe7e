package main

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/fqdn"
)

// TestDomainsNetworksWithinAPILimits: the networks form lists every
// address once, in rules of at most 25 peers of at most 25 networks (the
// API refuses more), with the server's address in the last accept rule,
// and ends with the deny rule; the one-set form is one accept rule.
func TestDomainsNetworksWithinAPILimits(t *testing.T) {
	for _, n := range []int{1, 10, 625, 626, 1000, 10000} {
		addrs := domAddrs(n)
		if len(addrs) != n || addrs[n-1].String() != labAddr("server") {
			t.Fatalf("N=%d: %d addresses, last %v", n, len(addrs), addrs[len(addrs)-1])
		}
		p := domainsCNP(domNetworks, addrs)
		rules := p.Spec.Egress
		if len(rules) != networkRules(n)+1 || len(rules) > 25 {
			t.Fatalf("N=%d: %d rules, want %d accept rules and a deny", n, len(rules), networkRules(n))
		}
		if last := rules[len(rules)-1]; last.Name != "deny-all" || string(last.Action) != "Deny" {
			t.Fatalf("N=%d: last rule %s %s, want the deny", n, last.Name, last.Action)
		}
		seen := map[string]bool{}
		for i, r := range rules[:len(rules)-1] {
			if len(r.To) > cnpPeersPerRule {
				t.Fatalf("N=%d rule %d: %d peers", n, i, len(r.To))
			}
			for _, peer := range r.To {
				if len(peer.Networks) == 0 || len(peer.Networks) > cnpNetsPerPeer {
					t.Fatalf("N=%d rule %d: a peer of %d networks", n, i, len(peer.Networks))
				}
				for _, c := range peer.Networks {
					if seen[string(c)] {
						t.Fatalf("N=%d: %s twice", n, c)
					}
					seen[string(c)] = true
				}
			}
		}
		if len(seen) != n {
			t.Fatalf("N=%d: %d networks listed", n, len(seen))
		}
		lastAccept := rules[len(rules)-2]
		lastPeer := lastAccept.To[len(lastAccept.To)-1]
		if got := string(lastPeer.Networks[len(lastPeer.Networks)-1]); got != labAddr("server")+"/32" {
			t.Fatalf("N=%d: the last network is %s, want the server's", n, got)
		}
		if one := domainsCNP(domOneSet, addrs).Spec.Egress; len(one) != 2 {
			t.Fatalf("N=%d: the one-set form has %d rules, want an accept and the deny", n, len(one))
		}
	}
}

// TestDomainsTables: each configuration compiles without problems or
// warnings to the table the scenario describes: the domain form a
// timeout set the client's egress chain looks up with "saddr . daddr"
// and a fill of N "CLIENT . ADDR" elements; the networks form one
// interval set per accept rule, together holding the N addresses; the
// one-set form one interval set holding all of them. Every form ends the
// client's chain with the deny.
func TestDomainsTables(t *testing.T) {
	for _, n := range []int{10, 1000, 10000} {
		for _, kind := range []domKind{domDomain, domNetworks, domOneSet} {
			c := domConfig{kind, n}
			d, fill, err := domainsTable(c)
			if err != nil {
				t.Fatalf("%v: %v", c, err)
			}
			chain := egressChain(t, d)
			if len(chain.Rules) < 2 || !strings.Contains(chain.Rules[len(chain.Rules)-1].Rule, "drop") {
				t.Fatalf("%v: client's chain does not end in the deny: %v", c, chain.Rules)
			}
			intervals := map[string]int{}
			for _, s := range d.Sets {
				if s.Interval && strings.Contains(s.Name, "net4") {
					intervals[s.Name] = len(s.Elements)
				}
			}
			lookups := 0
			for _, r := range chain.Rules {
				if strings.Contains(r.Rule, "goto np_ingress") {
					lookups++
				}
			}
			switch kind {
			case domDomain:
				if len(fill) != n {
					t.Fatalf("%v: fill of %d", c, len(fill))
				}
				set := fill[0].Set
				if !strings.Contains(chainText(chain), "ip saddr . ip daddr @"+set) {
					t.Fatalf("%v: the client's chain does not look up %s: %v", c, set, chain.Rules)
				}
				for i, el := range fill {
					if el.Set != set || el.Key != labAddr("client")+" . "+domAddrs(n)[i].String() || el.Timeout <= 0 {
						t.Fatalf("%v: element %d is %+v", c, i, el)
					}
				}
				// One rule per family: the set pair is "_4" and "_6".
				if lookups != 2 || !strings.Contains(chainText(chain), "ip6 saddr . ip6 daddr @"+strings.TrimSuffix(set, "_4")+"_6") {
					t.Fatalf("%v: %d accepting lookups, want the IPv4 and the IPv6 one: %v", c, lookups, chain.Rules)
				}
			case domNetworks:
				total := 0
				for _, k := range intervals {
					total += k
				}
				// The deny's 0.0.0.0/0 is a set of its own, of one element.
				if len(intervals) != networkRules(n)+1 || total != n+1 || lookups != networkRules(n) {
					t.Fatalf("%v: %d interval sets of %d elements, %d accepting lookups", c, len(intervals), total, lookups)
				}
			case domOneSet:
				if !hasSetOf(intervals, n) || lookups != 1 {
					t.Fatalf("%v: interval sets %v, %d accepting lookups; want one of %d and one lookup", c, intervals, lookups, n)
				}
			}
		}
	}
}

func egressChain(t *testing.T, d *engine.Desired) engine.Chain {
	t.Helper()
	for _, ch := range d.Chains {
		if strings.HasPrefix(ch.Name, "cnp_ae_dp_client") {
			return ch
		}
	}
	t.Fatal("no Admin egress chain for dp/client")
	return engine.Chain{}
}

func chainText(ch engine.Chain) string {
	var b strings.Builder
	for _, r := range ch.Rules {
		b.WriteString(r.Rule + "\n")
	}
	return b.String()
}

func hasSetOf(sets map[string]int, n int) bool {
	for _, k := range sets {
		if k == n {
			return true
		}
	}
	return false
}

// TestDomainsConfigs: one-set configurations exist exactly where the API
// needs more than one networks rule.
func TestDomainsConfigs(t *testing.T) {
	got := domainsConfigs(domainsSpec{Addrs: []int{10, 625, 626}})
	want := []domConfig{{domNone, 0}, {domDomain, 10}, {domNetworks, 10}, {domDomain, 625}, {domNetworks, 625},
		{domDomain, 626}, {domNetworks, 626}, {domOneSet, 626}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestPercentile(t *testing.T) {
	v := make([]float64, 100)
	for i := range v {
		v[i] = float64(i + 1)
	}
	for _, c := range []struct {
		vals []float64
		p    float64
		want float64
	}{
		{nil, 0.5, 0},
		{[]float64{7}, 0.99, 7},
		{[]float64{1, 2}, 0.5, 1},
		{[]float64{1, 2, 3}, 0.5, 2},
		{v, 0.5, 50},
		{v, 0.99, 99},
		{v, 1, 100},
	} {
		if got := percentile(c.vals, c.p); got != c.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", c.vals, c.p, got, c.want)
		}
	}
}

// TestDomainsAddrsDistinct: the memory child's and the data path's
// addresses are distinct, so N adds make N elements.
func TestDomainsAddrsDistinct(t *testing.T) {
	seen := map[netip.Addr]bool{}
	for _, a := range domAddrs(10000) {
		if seen[a] {
			t.Fatalf("%v twice", a)
		}
		seen[a] = true
	}
}

// TestFwdAnswer: the forwarder lab's zone answers fwdName(k, m) with m A
// records of addresses no other query's answer names, and nothing else;
// a subject's answer adds one element per address, named by the question
// (the comment, 19–25 bytes).
func TestFwdAnswer(t *testing.T) {
	p := fwdTestParams()
	res, err := fwdBuild(p)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[netip.Addr]string{}
	for _, c := range []struct{ k, m int }{{0, 1}, {1, 10}, {2, 10}, {fwdMaxQueries - 1, 10}, {123456, 1}} {
		name := fwdName(c.k, c.m)
		if len(name) < 19 || len(name) > 25 {
			t.Errorf("%s: %d bytes", name, len(name))
		}
		rrs, rcode := fwdAnswer(strings.ToUpper(name)+".", dns.TypeA)
		if rcode != dns.RcodeSuccess || len(rrs) != c.m {
			t.Fatalf("%s: rcode %d, %d records", name, rcode, len(rrs))
		}
		for _, rr := range rrs {
			a, _ := netip.AddrFromSlice(rr.(*dns.A).A.To4())
			if !netip.MustParsePrefix("100.64.0.0/10").Contains(a) {
				t.Errorf("%s: %v outside 100.64.0.0/10", name, a)
			}
			if other, ok := seen[a]; ok {
				t.Errorf("%v in the answers of %s and %s", a, other, name)
			}
			seen[a] = name
		}
		resp := new(dns.Msg)
		resp.SetQuestion(name+".", dns.TypeA)
		resp.Response, resp.Answer = true, rrs
		got := res.DNS.Elements(p.Pods[0].IPv4, resp)
		if got.Ignored != "" || len(got.Matches) != c.m {
			t.Fatalf("%s from a subject: %d elements, ignored %q", name, len(got.Matches), got.Ignored)
		}
		for _, e := range got.Elements() {
			if e.Name != name || e.TTL != fwdTTL*time.Second {
				t.Errorf("%s: element %+v", name, e)
			}
		}
	}
	for _, q := range []struct {
		name  string
		qtype uint16
	}{{fwdName(1, 10), dns.TypeAAAA}, {fwdName(1, 11), dns.TypeA}, {fwdName(1, 0), dns.TypeA}, {fwdName(fwdMaxQueries, 1), dns.TypeA},
		{"q1.n1.bench.example.evil", dns.TypeA}, {"x.q1.n1.bench.example", dns.TypeA}, {"other.example", dns.TypeA}} {
		if rrs, rcode := fwdAnswer(q.name, q.qtype); rcode != dns.RcodeNameError || rrs != nil {
			t.Errorf("%s type %d: rcode %d, %d records; want NXDOMAIN", q.name, q.qtype, rcode, len(rrs))
		}
	}
}

func fwdTestParams() fwdParams {
	return fwdParams{
		Node:     "/var/run/netns/unused",
		PodCIDRs: [2]netip.Prefix{netip.MustParsePrefix("10.100.0.0/24"), netip.MustParsePrefix("fd00:10:100::/64")},
		Pods: []fwdPod{
			{Name: fwdSubject(0), IPv4: netip.MustParseAddr("10.100.0.2"), IPv6: netip.MustParseAddr("fd00:10:100::2"), Subject: true},
			{Name: fwdSubject(1), IPv4: netip.MustParseAddr("10.100.0.3"), IPv6: netip.MustParseAddr("fd00:10:100::3"), Subject: true},
			{Name: fwdPlain, IPv4: netip.MustParseAddr("10.100.0.4"), IPv6: netip.MustParseAddr("fd00:10:100::4")},
		},
		DNS:     [2]netip.Addr{netip.MustParseAddr("172.16.0.2"), netip.MustParseAddr("fd00:172:16:0::2")},
		Forward: [2]netip.AddrPort{netip.MustParseAddrPort("172.16.0.1:9753"), netip.MustParseAddrPort("[fd00:172:16:0::1]:9753")},
	}
}

// TestFwdInput: the forwarder lab's table makes the subjects (both
// addresses) the forwarder's, wanting the zone's names, and leaves the
// plain pod out of it and of the redirect (not pending either), with the
// lab's DNS server as upstream and a redirect chain to the forwarder's
// addresses.
func TestFwdInput(t *testing.T) {
	p := fwdTestParams()
	res, err := fwdBuild(p)
	if err != nil {
		t.Fatal(err)
	}
	tbl := res.DNS
	for _, pod := range p.Pods {
		for _, a := range []netip.Addr{pod.IPv4, pod.IPv6} {
			sub := tbl.Lookup(a)
			if (sub != nil) != pod.Subject {
				t.Errorf("%s %v: subject %v, want %v", pod.Name, a, sub != nil, pod.Subject)
			}
			if tbl.Pending(a) {
				t.Errorf("%s %v is pending", pod.Name, a)
			}
			if pod.Subject && !tbl.Wants(a, fwdName(7, 10)) {
				t.Errorf("%s %v: the forwarder does not want %s", pod.Name, a, fwdName(7, 10))
			}
		}
	}
	if s, ok := tbl.Server(false); !ok || s != netip.AddrPortFrom(p.DNS[0], 53) {
		t.Errorf("IPv4 upstream %v %v, want %v:53", s, ok, p.DNS[0])
	}
	text := ""
	for _, ch := range res.Desired.Chains {
		for _, r := range ch.Rules {
			text += r.Rule + "\n"
		}
	}
	for _, f := range p.Forward {
		if !strings.Contains(text, f.Addr().String()) {
			t.Errorf("no rule redirects to the forwarder's %v", f.Addr())
		}
	}
}

// TestCheckAnswer: a reply counts only with the query's id, the response
// bit, no error and the expected number of answer records.
func TestCheckAnswer(t *testing.T) {
	q := new(dns.Msg)
	q.SetQuestion(fwdName(3, 10)+".", dns.TypeA)
	r := new(dns.Msg)
	r.SetReply(q)
	r.Answer, _ = fwdAnswer(fwdName(3, 10), dns.TypeA)
	ok, _ := r.Pack()
	if err := checkAnswer(ok, q.Id, 10); err != nil {
		t.Errorf("the right reply: %v", err)
	}
	nx := new(dns.Msg)
	nx.SetRcode(q, dns.RcodeNameError)
	bad, _ := nx.Pack()
	for name, c := range map[string]struct {
		b  []byte
		id uint16
		n  int
	}{"short": {ok[:11], q.Id, 10}, "other id": {ok, q.Id + 1, 10}, "fewer records": {ok, q.Id, 11}, "NXDOMAIN": {bad, q.Id, 0}, "the query": {mustPack(t, q), q.Id, 0}} {
		if err := checkAnswer(c.b, c.id, c.n); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func mustPack(t *testing.T, m *dns.Msg) []byte {
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMemName: the memory child's comments are 33 bytes, within what
// the kernel keeps (128), distinct for every answer and under domPattern.
func TestMemName(t *testing.T) {
	p, err := fqdn.ParsePattern(domPattern)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, i := range []int{0, 1, 9999, 99999} {
		n := memName(i)
		if len(n) != 33 || seen[n] || !p.Matches(n) {
			t.Errorf("memName(%d) = %q", i, n)
		}
		seen[n] = true
	}
}
