// Package cidrs holds the address-prefix arithmetic the compilers and the
// table checker share, so that it is written, and fixed, once.
package cidrs

import (
	"net/netip"
	"slices"
)

// Last is the highest address of a prefix: its host bits all set.
func Last(p netip.Prefix) netip.Addr {
	p = p.Masked()
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 1 << (7 - uint(i%8))
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// Fold returns the prefixes masked, sorted (by address, then length) and
// without repeats or those inside another, as an interval set needs them:
// the kernel refuses overlapping elements. ps is not changed.
//
// Masking comes first because an unmasked prefix sorts by its host bits:
// 10.0.0.5/24 would come after 10.0.0.3/32 and be dropped as lying inside
// it, when the /24 holds the /32.
func Fold(ps []netip.Prefix) []netip.Prefix {
	cp := make([]netip.Prefix, len(ps))
	for i, p := range ps {
		cp[i] = p.Masked()
	}
	slices.SortFunc(cp, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	// Two masked prefixes are either disjoint or nested, and sorting
	// puts a container before what it contains: only the last prefix
	// kept can contain the next one, so one comparison each keeps this
	// O(n log n).
	out := cp[:0]
	for _, p := range cp {
		if n := len(out); n > 0 && out[n-1].Bits() <= p.Bits() && out[n-1].Contains(p.Addr()) {
			continue
		}
		out = append(out, p)
	}
	return out
}
