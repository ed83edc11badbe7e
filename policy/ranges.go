package policy

import (
	"math/bits"
	"net/netip"
	"sort"

	netutils "k8s.io/utils/net"

	"github.com/nftguard/nftguard/internal/cidrs"
)

// ParseIPBlockCIDR reads an ipBlock's cidr or except as Kubernetes
// components read it: as k8s.io/utils/net.ParseCIDRSloppy does, which
// is how the API server validated it before its strict validation
// (StrictIPCIDRValidation, on by default since Kubernetes 1.36), so that
// a policy an older API server stored, and a newer one still serves, means
// what it meant. Octets and prefix lengths with leading zeros are decimal,
// bits beyond the prefix length are cleared, and an IPv4-mapped IPv6
// network (::ffff:10.77.1.0/120) is the IPv4 network it maps
// (10.77.1.0/24), as Go's net package, which the API server and most
// implementations parse with, treats it. Read as written it would be an
// IPv6 network that no IPv4 packet matches: an except that excepts
// nothing, or a peer that allows nothing in the family its author meant.
//
// A value that the API server refuses when a policy is created is
// refused by the manifest reader (package manifest), like the API server:
// this reading is for objects an API server serves.
func ParseIPBlockCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		_, n, sloppyErr := netutils.ParseCIDRSloppy(s)
		if sloppyErr != nil {
			return netip.Prefix{}, err // netip's reason names the part that is wrong
		}
		ones, _ := n.Mask.Size()
		a, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			return netip.Prefix{}, err
		}
		p = netip.PrefixFrom(a, ones)
	}
	p = p.Masked()
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p, nil
}

// addrRange is an inclusive range of addresses of one family.
type addrRange struct{ lo, hi netip.Addr }

// blockRanges returns cidr minus every except, as sorted disjoint ranges.
// It sorts the excepts and sweeps once across the cidr, O(n log n): cutting
// each except out of every remaining range in turn is O(n²), which a policy
// with 10,000 excepts turns into tens of seconds of every node's compile.
func blockRanges(cidr netip.Prefix, except []netip.Prefix) []addrRange {
	lo, hi := cidr.Masked().Addr(), cidrs.Last(cidr)
	ex := make([]addrRange, 0, len(except))
	for _, e := range except {
		elo, ehi := e.Masked().Addr(), cidrs.Last(e)
		// Validation keeps excepts inside cidr; clip anyway, so the
		// sweep never leaves it.
		if ehi.Less(lo) || hi.Less(elo) || elo.BitLen() != lo.BitLen() {
			continue
		}
		ex = append(ex, addrRange{elo, ehi})
	}
	sort.Slice(ex, func(i, j int) bool { return ex[i].lo.Less(ex[j].lo) })
	var out []addrRange
	// next is the lowest address not yet emitted or cut; done means the
	// sweep passed the top of the address space.
	next, done := lo, false
	for _, e := range ex {
		if done || hi.Less(next) {
			break
		}
		if next.Less(e.lo) {
			out = append(out, addrRange{next, e.lo.Prev()})
		}
		if !e.hi.Less(next) {
			next = e.hi.Next()
			done = !next.IsValid() // e ends at the last address
		}
	}
	if !done && !hi.Less(next) {
		out = append(out, addrRange{next, hi})
	}
	return out
}

// mergeRanges sorts ranges and joins the ones that overlap or touch, because
// an interval set refuses overlapping elements.
func mergeRanges(rs []addrRange) []addrRange {
	if len(rs) == 0 {
		return nil
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].lo.Less(rs[j].lo) })
	out := []addrRange{rs[0]}
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		if !last.hi.Next().IsValid() || !last.hi.Next().Less(r.lo) {
			if last.hi.Less(r.hi) {
				last.hi = r.hi
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// rangeText renders a range the way nft prints it: a single address, a
// prefix when the range is exactly one, or lo-hi.
func rangeText(r addrRange) string {
	if r.lo == r.hi {
		return r.lo.String()
	}
	// Only one prefix can be exactly the range: the one of the bits lo
	// and hi share (trying every length would cost 129 tries per range).
	p := netip.PrefixFrom(r.lo, commonBits(r.lo, r.hi))
	if p.Masked().Addr() == r.lo && cidrs.Last(p) == r.hi {
		return p.String()
	}
	return r.lo.String() + "-" + r.hi.String()
}

// commonBits is the number of leading bits a and b (of one family) share.
func commonBits(a, b netip.Addr) int {
	x, y := a.As16(), b.As16()
	n := 0
	for i := range x {
		if d := x[i] ^ y[i]; d != 0 {
			n += bits.LeadingZeros8(d)
			break
		}
		n += 8
	}
	if a.Is4() {
		n -= 96 // the ::ffff:0:0/96 both share in As16
	}
	return n
}
