package nftsafe

import (
	"fmt"
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/nftguard/nftguard/engine"
)

// identifier is what nft's scanner reads as a name (a "string" token);
// anything else in a chain or set name would print as text nft cannot read
// back, or as other syntax.
var identifier = regexp.MustCompile(`^[a-zA-Z_.][a-zA-Z0-9/_.\-]*$`)

// ruleRef finds the sets and chains a rule or a verdict-map value refers to.
var (
	setRef   = regexp.MustCompile(`@([a-zA-Z0-9/_.\-]+)`)
	chainRef = regexp.MustCompile(`\b(?:jump|goto) ([a-zA-Z0-9/_.\-]+)`)
	anonSet  = regexp.MustCompile(`\{([^{}]*)\}`)
	// logPrefix is the one quoted string rule text may carry: the prefix
	// of a log statement (logging of denied packets).
	logPrefix = regexp.MustCompile(`\blog prefix "([^"]*)"`)
)

// MaxLogPrefix is the longest log prefix nft accepts (NF_LOG_PREFIXLEN
// less its terminating NUL).
const MaxLogPrefix = 127

// Check reports everything in d that the kernel would refuse, or that nft
// could not print and read back as the same table: names that are not nft
// identifiers or too long, repeated chain or set names, comments that are
// too long or carry quotes, backslashes or control bytes, rule and element
// text with nft's statement syntax in it, references to missing sets and
// chains, repeated elements, and overlapping intervals in interval sets and
// in a rule's anonymous sets. It is what the compilers' tests hold every
// compiled table to; nil means none of these.
func Check(d *engine.Desired) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	chains := map[string]bool{}
	sets := map[string]bool{}
	for _, c := range d.Chains {
		checkName(bad, "chain", c.Name)
		if chains[c.Name] {
			bad("chain %q declared twice", c.Name)
		}
		chains[c.Name] = true
		checkComment(bad, "chain "+c.Name, c.Comment)
	}
	for _, s := range d.Sets {
		checkName(bad, "set", s.Name)
		if sets[s.Name] {
			bad("set %q declared twice", s.Name)
		}
		sets[s.Name] = true
		checkComment(bad, "set "+s.Name, s.Comment)
	}
	for _, s := range d.Sets {
		checkSet(bad, s, chains)
	}
	for _, c := range d.Chains {
		for i, r := range c.Rules {
			where := fmt.Sprintf("chain %s rule %d", c.Name, i)
			checkComment(bad, where, r.Comment)
			text := r.Rule
			for _, m := range logPrefix.FindAllStringSubmatch(text, -1) {
				if len(m[1]) > MaxLogPrefix {
					bad("%s: log prefix of %d bytes, nft takes at most %d", where, len(m[1]), MaxLogPrefix)
				}
				if !commentOK(m[1]) {
					bad("%s: log prefix %q has a byte nft cannot quote", where, m[1])
				}
			}
			// The prefixes checked, the rest holds no quote at all.
			checkText(bad, where, logPrefix.ReplaceAllString(text, "log prefix P"), "\"#;\\")
			for _, m := range setRef.FindAllStringSubmatch(r.Rule, -1) {
				if !sets[m[1]] {
					bad("%s: set @%s is not declared", where, m[1])
				}
			}
			for _, m := range chainRef.FindAllStringSubmatch(r.Rule, -1) {
				if !chains[m[1]] {
					bad("%s: chain %s is not declared", where, m[1])
				}
			}
			for _, m := range anonSet.FindAllStringSubmatch(r.Rule, -1) {
				var items []string
				for _, it := range strings.Split(m[1], ",") {
					items = append(items, strings.TrimSpace(it))
				}
				checkElements(bad, where+" anonymous set", items, true)
			}
		}
	}
	return errs
}

func checkName(bad func(string, ...any), kind, name string) {
	if len(name) > KernelMaxName {
		bad("%s name %q: %d bytes, the kernel takes at most %d", kind, name, len(name), KernelMaxName)
	}
	if !identifier.MatchString(name) {
		bad("%s name %q is not an nft identifier", kind, name)
	}
}

func checkComment(bad func(string, ...any), where, c string) {
	if len(c) > MaxComment {
		bad("%s: comment of %d bytes, nft takes at most %d", where, len(c), MaxComment)
	}
	if !commentOK(c) {
		bad("%s: comment %q has a byte nft cannot quote", where, c)
	}
}

// checkText reports bytes outside printable ASCII and the given syntax
// characters, which would end or add statements in rendered text.
func checkText(bad func(string, ...any), where, s, forbidden string) {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e || strings.IndexByte(forbidden, s[i]) >= 0 {
			bad("%s: %q has the byte %q", where, s, s[i])
			return
		}
	}
}

func checkSet(bad func(string, ...any), s engine.Set, chains map[string]bool) {
	where := "set " + s.Name
	keys := make([]string, 0, len(s.Elements))
	for _, e := range s.Elements {
		checkText(bad, where+" element", e.Key, "\"#;\\{},")
		checkText(bad, where+" element value", e.Value, "\"#;\\{},")
		if s.Map == "verdict" {
			for _, m := range chainRef.FindAllStringSubmatch(e.Value, -1) {
				if !chains[m[1]] {
					bad("%s: element %s: chain %s is not declared", where, e.Key, m[1])
				}
			}
		}
		keys = append(keys, e.Key)
	}
	switch {
	case s.Interval && (s.Type == "ipv4_addr" || s.Type == "ipv6_addr"):
		checkElements(bad, where, keys, true)
		for _, k := range keys {
			r, ok := parseInterval(k)
			if ok && r.lo.Is4() != (s.Type == "ipv4_addr") {
				bad("%s: element %s is not of type %s", where, k, s.Type)
			}
		}
	default:
		checkElements(bad, where, keys, false)
	}
}

// interval is an inclusive range of addresses or (when port) of numbers.
type interval struct {
	lo, hi   netip.Addr
	plo, phi uint64
	port     bool
}

// parseInterval reads an address, a prefix, lo-hi of either, a number or
// lo-hi of numbers.
func parseInterval(s string) (interval, bool) {
	lo, hi, isRange := strings.Cut(s, "-")
	if n, err := strconv.ParseUint(lo, 10, 64); err == nil {
		m := n
		if isRange {
			if m, err = strconv.ParseUint(hi, 10, 64); err != nil {
				return interval{}, false
			}
		}
		return interval{plo: n, phi: m, port: true}, true
	}
	if isRange {
		a, err1 := netip.ParseAddr(lo)
		b, err2 := netip.ParseAddr(hi)
		if err1 != nil || err2 != nil {
			return interval{}, false
		}
		return interval{lo: a, hi: b}, true
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		return interval{lo: p.Masked().Addr(), hi: last(p)}, true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return interval{lo: a, hi: a}, true
	}
	return interval{}, false
}

func last(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 1 << (7 - uint(i%8))
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// checkElements reports repeated elements and, when intervals, elements
// that overlap (touching is fine: the kernel takes adjacent intervals).
func checkElements(bad func(string, ...any), where string, keys []string, intervals bool) {
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if seen[k] {
			bad("%s: element %s repeated", where, k)
		}
		seen[k] = true
	}
	if !intervals {
		return
	}
	type item struct {
		text string
		iv   interval
	}
	var items []item
	for _, k := range keys {
		if iv, ok := parseInterval(k); ok {
			if (iv.port && iv.phi < iv.plo) || (!iv.port && iv.hi.Less(iv.lo)) {
				bad("%s: element %s is an empty range", where, k)
				continue
			}
			items = append(items, item{k, iv})
		}
	}
	less := func(a, b interval) bool {
		if a.port != b.port {
			return a.port
		}
		if a.port {
			return a.plo < b.plo
		}
		return a.lo.Less(b.lo)
	}
	sort.Slice(items, func(i, j int) bool { return less(items[i].iv, items[j].iv) })
	for i := 1; i < len(items); i++ {
		a, b := items[i-1].iv, items[i].iv
		if a.port != b.port {
			continue
		}
		overlap := (a.port && b.plo <= a.phi) || (!a.port && a.lo.BitLen() == b.lo.BitLen() && !a.hi.Less(b.lo))
		if overlap {
			bad("%s: element %s overlaps %s", where, items[i].text, items[i-1].text)
		}
	}
}
