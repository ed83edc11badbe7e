package policy

import (
	"fmt"
	"math/rand"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/internal/apitest"
	"github.com/nftguard/nftguard/internal/cidrs"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/npset"
)

// refBlockRanges is cidr minus every except by the simplest method there
// is: cut each except out of every range left so far, one after the other
// (O(n²), what blockRanges did before its sweep). blockRanges must give
// exactly its output.
func refBlockRanges(cidr netip.Prefix, except []netip.Prefix) []addrRange {
	cur := []addrRange{{cidr.Masked().Addr(), cidrs.Last(cidr)}}
	for _, e := range except {
		elo, ehi := e.Masked().Addr(), cidrs.Last(e)
		var next []addrRange
		for _, r := range cur {
			if ehi.Less(r.lo) || r.hi.Less(elo) {
				next = append(next, r)
				continue
			}
			if r.lo.Less(elo) {
				next = append(next, addrRange{r.lo, elo.Prev()})
			}
			if ehi.Less(r.hi) {
				next = append(next, addrRange{ehi.Next(), r.hi})
			}
		}
		cur = next
	}
	return cur
}

func TestBlockRangesTable(t *testing.T) {
	p := netip.MustParsePrefix
	for _, tc := range []struct {
		cidr   string
		except []string
		want   string
	}{
		{"10.0.0.0/8", nil, "10.0.0.0/8"},
		{"10.0.0.0/24", []string{"10.0.0.0/25"}, "10.0.0.128/25"},
		{"10.0.0.0/24", []string{"10.0.0.128/25", "10.0.0.0/25"}, ""},
		{"10.0.0.0/24", []string{"10.0.0.5/32", "10.0.0.5/32", "10.0.0.0/29"}, "10.0.0.8-10.0.0.255"},
		{"10.0.0.0/24", []string{"10.0.0.16/28", "10.0.0.20/30", "10.0.0.255/32"}, "10.0.0.0/28,10.0.0.32-10.0.0.254"},
		{"0.0.0.0/0", []string{"255.255.255.255/32", "0.0.0.0/32"}, "0.0.0.1-255.255.255.254"},
		{"::/0", []string{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128", "8000::/1"}, "::/1"},
	} {
		var ex []netip.Prefix
		for _, e := range tc.except {
			ex = append(ex, p(e))
		}
		rs := blockRanges(p(tc.cidr), ex)
		var texts []string
		for _, r := range rs {
			texts = append(texts, rangeText(r))
		}
		if got := strings.Join(texts, ","); got != tc.want {
			t.Errorf("%s except %v = %s, want %s", tc.cidr, tc.except, got, tc.want)
		}
		if diff := cmp.Diff(rangeTexts(refBlockRanges(p(tc.cidr), ex)), rangeTexts(rs)); diff != "" {
			t.Errorf("%s except %v (-reference +blockRanges):\n%s", tc.cidr, tc.except, diff)
		}
	}
}

// randomExcepts draws n excepts inside cidr, nested, repeated and touching
// ones included.
func randomExcepts(r *rand.Rand, cidr netip.Prefix, n int) []netip.Prefix {
	base := cidr.Masked().Addr().AsSlice()
	var out []netip.Prefix
	for i := 0; i < n; i++ {
		if len(out) > 0 && r.Intn(10) == 0 {
			out = append(out, out[r.Intn(len(out))])
			continue
		}
		b := append([]byte(nil), base...)
		// Random host bits in the last bytes (past the cidr's prefix).
		for k := cidr.Bits(); k < len(b)*8; k++ {
			if k >= len(b)*8-12 && r.Intn(2) == 0 {
				b[k/8] |= 1 << (7 - uint(k%8))
			}
		}
		a, _ := netip.AddrFromSlice(b)
		bits := cidr.Bits() + 1 + r.Intn(len(b)*8-cidr.Bits())
		out = append(out, netip.PrefixFrom(a, bits).Masked())
	}
	return out
}

func TestBlockRangesEqualsReferenceRandom(t *testing.T) {
	r := rand.New(rand.NewSource(13))
	cidrs := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/20"), netip.MustParsePrefix("10.1.2.0/24"),
		netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("2001:db8::/116"),
		netip.MustParsePrefix("::/0"), netip.MustParsePrefix("255.255.255.0/24"),
	}
	for i := 0; i < 3000; i++ {
		cidr := cidrs[r.Intn(len(cidrs))]
		ex := randomExcepts(r, cidr, r.Intn(40))
		if diff := cmp.Diff(rangeTexts(refBlockRanges(cidr, ex)), rangeTexts(blockRanges(cidr, ex))); diff != "" {
			t.Fatalf("%s except %v (-reference +blockRanges):\n%s", cidr, ex, diff)
		}
	}
}

// sparseExceptPolicy is one ipBlock with n /32 (or /128) excepts spread
// over its cidr: the hostile input that took 15–22 s before the sweep.
func sparseExceptPolicy(n int, v6 bool) Input {
	cidr, addr := "10.0.0.0/8", func(i int) string { return fmt.Sprintf("10.%d.%d.%d/32", i>>14&0xff, i>>6&0xff, i<<2&0xff) }
	if v6 {
		cidr, addr = "2001:db8::/32", func(i int) string { return fmt.Sprintf("2001:db8:%x::%x/128", i, i) }
	}
	var except []string
	for i := 0; i < n; i++ {
		except = append(except, addr(i))
	}
	np := netpol("x", "sparse", metav1.LabelSelector{}, func(s *networkingv1.NetworkPolicySpec) {
		s.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
			IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}}}}
	})
	return Input{NodeName: "n1", Namespaces: []*corev1.Namespace{apitest.Namespace("x")}, Pods: podtest.Set([]*corev1.Pod{apitest.Pod("x", "a", "10.77.1.10")}), Policies: npset.New([]*networkingv1.NetworkPolicy{np})}
}

// 10,000 sparse excepts compile into 10,000 ranges of one interval set.
// How fast is BenchmarkExceptScaling's subject (before the sweep they took
// 15–22 s).
func TestTenThousandExcepts(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		in := sparseExceptPolicy(10000, v6)
		out := compileChecked(t, in)
		if len(out.Problems) > 0 {
			t.Fatal(out.Problems)
		}
		n := 0
		for _, s := range out.Sets {
			if strings.Contains(s.Name, "_cidr") {
				n = len(s.Elements)
			}
		}
		if n != 10000 { // the first except is the cidr's first address
			t.Errorf("v6=%v: %d ranges, want 10000", v6, n)
		}
	}
}

// BenchmarkExceptScaling compiles 1,000 and 10,000 sparse excepts and
// reports the ratio of their cost per except: about 1 while the sweep
// keeps the compile linear in the excepts, about 10 for the quadratic
// cut it replaced (which took 15–22 s for 10,000). One tenant's ipBlock
// must not stall every node's sync.
func BenchmarkExceptScaling(b *testing.B) {
	for _, v6 := range []bool{false, true} {
		fam := "v4"
		if v6 {
			fam = "v6"
		}
		small, large := sparseExceptPolicy(1000, v6), sparseExceptPolicy(10000, v6)
		b.Run(fam, func(b *testing.B) {
			var tSmall, tLarge time.Duration
			for i := 0; i < b.N; i++ {
				start := time.Now()
				Compile(small)
				mid := time.Now()
				Compile(large)
				tSmall, tLarge = tSmall+mid.Sub(start), tLarge+time.Since(mid)
			}
			perSmall := float64(tSmall) / float64(b.N) / 1000
			perLarge := float64(tLarge) / float64(b.N) / 10000
			b.ReportMetric(perLarge, "ns/except@10k")
			b.ReportMetric(perLarge/perSmall, "ratio-10k/1k")
		})
	}
}

func BenchmarkExcept(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, v6 := range []bool{false, true} {
			fam := "v4"
			if v6 {
				fam = "v6"
			}
			in := sparseExceptPolicy(n, v6)
			b.Run(fmt.Sprintf("%s/%d", fam, n), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					out := Compile(in)
					if len(out.Problems) > 0 {
						b.Fatal(out.Problems)
					}
				}
			})
		}
	}
}

// rangeText finds the one prefix a range can be, as trying every length did.
func TestRangeTextEqualsEveryLengthTried(t *testing.T) {
	ref := func(r addrRange) string {
		if r.lo == r.hi {
			return r.lo.String()
		}
		for bits := 0; bits <= r.lo.BitLen(); bits++ {
			p := netip.PrefixFrom(r.lo, bits)
			if p.Masked().Addr() == r.lo && cidrs.Last(p) == r.hi {
				return p.String()
			}
		}
		return r.lo.String() + "-" + r.hi.String()
	}
	r := rand.New(rand.NewSource(4))
	for i := 0; i < 20000; i++ {
		var p netip.Prefix
		if r.Intn(2) == 0 {
			p = netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(r.Intn(256)), byte(r.Intn(256)), 0, byte(r.Intn(256))}), r.Intn(33)).Masked()
		} else {
			p = netip.PrefixFrom(netip.AddrFrom16([16]byte{0x20, 1, byte(r.Intn(256)), 15: byte(r.Intn(256))}), r.Intn(129)).Masked()
		}
		rg := addrRange{p.Addr(), cidrs.Last(p)}
		switch r.Intn(3) {
		case 1:
			if rg.hi != rg.lo {
				rg.hi = rg.hi.Prev()
			}
		case 2:
			if n := rg.lo.Next(); n.IsValid() && !rg.hi.Less(n) {
				rg.lo = n
			}
		}
		if got, want := rangeText(rg), ref(rg); got != want {
			t.Fatalf("%v: %s, want %s", rg, got, want)
		}
	}
}
