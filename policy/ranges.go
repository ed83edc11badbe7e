package policy

import (
	"net/netip"
	"sort"
)

// addrRange is an inclusive range of addresses of one family.
type addrRange struct{ lo, hi netip.Addr }

// lastAddr is the highest address of a prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	p = p.Masked()
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 1 << (7 - uint(i%8))
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// blockRanges returns cidr minus every except, as sorted disjoint ranges.
func blockRanges(cidr netip.Prefix, except []netip.Prefix) []addrRange {
	cur := []addrRange{{cidr.Masked().Addr(), lastAddr(cidr)}}
	for _, e := range except {
		elo, ehi := e.Masked().Addr(), lastAddr(e)
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
	for bits := 0; bits <= r.lo.BitLen(); bits++ {
		p := netip.PrefixFrom(r.lo, bits)
		if p.Masked().Addr() == r.lo && lastAddr(p) == r.hi {
			return p.String()
		}
	}
	return r.lo.String() + "-" + r.hi.String()
}
