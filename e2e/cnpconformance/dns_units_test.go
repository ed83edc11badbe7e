package cnpconformance

import (
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	confv1a1 "sigs.k8s.io/network-policy-api/conformance/apis/v1alpha1"
	"sigs.k8s.io/yaml"
)

func TestNameList(t *testing.T) {
	rc := podResolvConf(netip.MustParseAddr("10.96.0.10"), "ns1")
	search := []string{"ns1.svc.cluster.local.", "svc.cluster.local.", "cluster.local."}
	long := strings.Repeat("a.", 126) + "b" // 253 characters
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"kube-dns", []string{"kube-dns.ns1.svc.cluster.local.", "kube-dns.svc.cluster.local.", "kube-dns.cluster.local.", "kube-dns."}},
		{"diagon-alley.hogwarts.test", []string{
			"diagon-alley.hogwarts.test.ns1.svc.cluster.local.", "diagon-alley.hogwarts.test.svc.cluster.local.",
			"diagon-alley.hogwarts.test.cluster.local.", "diagon-alley.hogwarts.test."}},
		// Five dots: as it is first.
		{"a.b.c.d.e.f", append([]string{"a.b.c.d.e.f."}, "a.b.c.d.e.f."+search[0], "a.b.c.d.e.f."+search[1], "a.b.c.d.e.f."+search[2])},
		{"diagon-alley.hogwarts.test.", []string{"diagon-alley.hogwarts.test."}},
		// Too long with a search domain: only as it is.
		{long, []string{long + "."}},
		{long + "c", nil},
		{"", nil},
	} {
		if got := rc.nameList(tc.name); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("nameList(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestLabAnswer(t *testing.T) {
	for _, tc := range []struct {
		name  string
		qtype uint16
		rcode int
		addr  string
	}{
		{"diagon-alley.hogwarts.test.", dns.TypeA, dns.RcodeSuccess, "198.18.0.10"},
		{"Three-Broomsticks.Hogsmeade.hogwarts.test.", dns.TypeA, dns.RcodeSuccess, "198.18.0.13"},
		{"diagon-alley.hogwarts.test.", dns.TypeAAAA, dns.RcodeSuccess, ""},
		{"diagon-alley.hogwarts.test.ns.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, ""},
		{"hogwarts.test.", dns.TypeA, dns.RcodeNameError, ""},
	} {
		rrs, rcode := labAnswer(tc.name, tc.qtype)
		var got string
		if len(rrs) == 1 {
			got = rrs[0].(*dns.A).A.String()
			if rrs[0].Header().Name != tc.name || rrs[0].Header().Ttl != labNameTTL {
				t.Errorf("%s: record %v", tc.name, rrs[0])
			}
		}
		if rcode != tc.rcode || got != tc.addr || len(rrs) > 1 {
			t.Errorf("%s %s: rcode %d %v, want %d %s", tc.name, dns.TypeToString[tc.qtype], rcode, rrs, tc.rcode, tc.addr)
		}
	}
}

// TestDomainNamesTestdata checks the domain names test against the lab's
// zone: every name it probes is served, each at its own address in
// namesNetwork, which is the network its manifest denies, and the
// manifest's accepted names are the ones the test's comment lists.
func TestDomainNamesTestdata(t *testing.T) {
	probed := regexp.MustCompile(`"([a-z0-9.-]+\.hogwarts\.test)"`).FindAllStringSubmatch(string(domainNamesSrc), -1)
	if len(probed) < 8 {
		t.Fatalf("found %d probes of hogwarts.test names in the test", len(probed))
	}
	seen := map[string]bool{}
	for _, m := range probed {
		seen[m[1]+"."] = true
		addr, ok := labNames[m[1]+"."]
		if !ok || !namesNetwork.Contains(addr) {
			t.Errorf("the test probes %s: lab address %v (served %v), want one in %v", m[1], addr, ok, namesNetwork)
		}
	}
	addrs := map[netip.Addr]string{}
	for name, a := range labNames {
		if !seen[name] {
			t.Errorf("the lab serves %s, which the test never probes", name)
		}
		if other, dup := addrs[a]; dup {
			t.Errorf("%s and %s share %v: a denied name would reach an accepted one's address", name, other, a)
		}
		addrs[a] = name
	}
	var manifest struct {
		Spec struct {
			Egress []struct {
				Action string
				To     []struct {
					DomainNames []string `json:"domainNames"`
					Networks    []string `json:"networks"`
				}
			}
		}
	}
	if err := yaml.Unmarshal(domainNamesManifest, &manifest); err != nil {
		t.Fatal(err)
	}
	eg := manifest.Spec.Egress
	if len(eg) != 2 || eg[0].Action != "Accept" || eg[1].Action != "Deny" || len(eg[1].To) != 1 ||
		!reflect.DeepEqual(eg[1].To[0].Networks, []string{namesNetwork.String()}) ||
		!reflect.DeepEqual(eg[0].To[0].DomainNames, []string{"diagon-alley.hogwarts.test", "*.hogsmeade.hogwarts.test"}) {
		t.Errorf("manifest egress %+v", eg)
	}
}

// fakeDNS answers queries written to a stream connection (the framing
// miekg/dns uses on a connection that is not a packet one), recording the
// questions; answer nil drops every query.
type fakeDNS struct {
	answer func(name string, qtype uint16) ([]dns.RR, int)
	mu     sync.Mutex
	asked  []string
}

func (f *fakeDNS) dial(network, addr string) (net.Conn, error) {
	client, server := net.Pipe()
	go func() {
		defer server.Close()
		var n uint16
		if err := binary.Read(server, binary.BigEndian, &n); err != nil {
			return
		}
		buf := make([]byte, n)
		if _, err := io.ReadFull(server, buf); err != nil {
			return
		}
		q := new(dns.Msg)
		if q.Unpack(buf) != nil || len(q.Question) != 1 {
			return
		}
		f.mu.Lock()
		f.asked = append(f.asked, network+" "+addr+" "+dns.TypeToString[q.Question[0].Qtype]+" "+q.Question[0].Name)
		f.mu.Unlock()
		if f.answer == nil {
			_, _ = io.Copy(io.Discard, server) // until the client gives up
			return
		}
		r := new(dns.Msg)
		r.SetReply(q)
		r.Answer, r.Rcode = f.answer(q.Question[0].Name, q.Question[0].Qtype)
		out, err := r.Pack()
		if err != nil {
			return
		}
		_ = binary.Write(server, binary.BigEndian, uint16(len(out)))
		_, _ = server.Write(out)
	}()
	return client, nil
}

func TestResolvConfLookup(t *testing.T) {
	ns := netip.MustParseAddr("10.96.0.10")
	rc := podResolvConf(ns, "gryffindor")
	rc.timeout = 50 * time.Millisecond

	f := &fakeDNS{answer: labAnswer}
	addrs, err := rc.lookup("diagon-alley.hogwarts.test", f.dial)
	if err != nil || !reflect.DeepEqual(addrs, []netip.Addr{netip.MustParseAddr("198.18.0.10")}) {
		t.Fatalf("lookup: %v %v", addrs, err)
	}
	var want []string
	for _, n := range rc.nameList("diagon-alley.hogwarts.test") {
		want = append(want, "udp 10.96.0.10:53 A "+n, "udp 10.96.0.10:53 AAAA "+n)
	}
	if !reflect.DeepEqual(f.asked, want) {
		t.Errorf("questions %q\nwant %q", f.asked, want)
	}

	f = &fakeDNS{answer: labAnswer}
	_, err = rc.lookup("nosuch.hogwarts.test", f.dial)
	if err == nil || err.Error() != "lookup nosuch.hogwarts.test on 10.96.0.10:53: no such host" || len(f.asked) != 8 {
		t.Errorf("unknown name: %v after %d questions", err, len(f.asked))
	}

	f = &fakeDNS{answer: func(string, uint16) ([]dns.RR, int) { return nil, dns.RcodeServerFailure }}
	if _, err := rc.lookup("x.hogwarts.test.", f.dial); err == nil || !strings.Contains(err.Error(), "server misbehaving") {
		t.Errorf("SERVFAIL: %v", err)
	}

	// A server that never answers: each question gives up after the
	// timeout (the fake server reads until the client does), so the
	// lookup ends, with a timeout, after one question per attempt.
	f = &fakeDNS{}
	_, err = rc.lookup("x.hogwarts.test.", f.dial)
	if err == nil || !strings.Contains(err.Error(), "timeout") || len(f.asked) != 4 {
		t.Errorf("no answer: %v after %d questions", err, len(f.asked))
	}
}

func TestPickAddr(t *testing.T) {
	a := netip.MustParseAddr
	if got := pickAddr([]netip.Addr{a("2001:db8::1"), a("198.18.0.1"), a("198.18.0.2")}); got != a("198.18.0.1") {
		t.Errorf("got %v", got)
	}
	if got := pickAddr([]netip.Addr{a("2001:db8::1"), a("2001:db8::2")}); got != a("2001:db8::1") {
		t.Errorf("got %v", got)
	}
}

func TestPseudoVersion(t *testing.T) {
	rev := "b8e82b4abcdef0123456789abcdef0123456789a"
	if got := pseudoVersion(rev, "20261204100110", false); got != "v0.0.0-20261204100110-b8e82b4abcde" {
		t.Errorf("got %s", got)
	}
	if got := pseudoVersion(rev, "20261204100110", true); got != "v0.0.0-20261204100110-b8e82b4abcde+dirty" {
		t.Errorf("got %s", got)
	}
}

func TestSummarizeReport(t *testing.T) {
	good := func() *confv1a1.ConformanceReport {
		return &confv1a1.ConformanceReport{
			Implementation:             confv1a1.Implementation{Organization: "nftguard", Project: "nftguard", Version: "v1"},
			NetworkPolicyBundleVersion: "v0.3.0",
			ProfileReports: []confv1a1.ProfileReport{{
				Name:     "ClusterNetworkPolicy",
				Standard: confv1a1.Status{Result: confv1a1.Success, Statistics: confv1a1.Statistics{Passed: 28}},
				Experimental: &confv1a1.ExperimentalStatus{
					Status:            confv1a1.Status{Result: confv1a1.Success, Statistics: confv1a1.Statistics{Passed: 3}},
					SupportedFeatures: append([]string(nil), reportedFeatures...),
				},
			}},
		}
	}
	r := good()
	r.Kind = "ConformanceReport"
	if s, err := summarizeReport(r, "v1", 31); err != nil || !strings.Contains(s, "experimental success (3 passed") {
		t.Errorf("a good report: %q %v", s, err)
	}
	for name, mutate := range map[string]func(r *confv1a1.ConformanceReport){
		"wrong version":   func(r *confv1a1.ConformanceReport) { r.Version = "v2" },
		"standard failed": func(r *confv1a1.ConformanceReport) { r.ProfileReports[0].Standard.Result = confv1a1.Failure },
		"no experimental": func(r *confv1a1.ConformanceReport) { r.ProfileReports[0].Experimental = nil },
		"feature missing": func(r *confv1a1.ConformanceReport) {
			r.ProfileReports[0].Experimental.SupportedFeatures = reportedFeatures[:2]
		},
		"unsupported listed": func(r *confv1a1.ConformanceReport) {
			r.ProfileReports[0].Experimental.UnsupportedFeatures = []string{"X"}
		},
		"count differs": func(r *confv1a1.ConformanceReport) { r.ProfileReports[0].Standard.Passed = 27 },
		"no profile":    func(r *confv1a1.ConformanceReport) { r.ProfileReports = nil },
	} {
		r := good()
		r.Kind = "ConformanceReport"
		mutate(r)
		if _, err := summarizeReport(r, "v1", 31); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
