package podchain

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/nftsafe"
	"github.com/nftguard/nftguard/selection"
)

// AddrSet declares, for the rule being compiled, a named set holding the
// given elements, sorted and without repeats, and returns its name. It may
// reorder elems. A name another rule declared first keeps that rule's set
// (two objects of one key, possible only in manifests, share names; the
// first counts), and the rule that came second is compiled again next
// time rather than remembered: the first may not be there then.
func (c *Cycle) AddrSet(name, typ string, interval bool, elems []string, comment string) string {
	if _, ok := c.sets[name]; ok {
		c.scratch.collided = true
		return name
	}
	return c.declare(&engine.Set{Name: name, Type: typ, Interval: interval, Comment: comment, Elements: Elements(elems)})
}

// SharedSet is AddrSet for elements already sorted and without repeats,
// shared (never changed) with other sets.
func (c *Cycle) SharedSet(name, typ string, elems []engine.Element, comment string) string {
	if _, ok := c.sets[name]; ok {
		c.scratch.collided = true
		return name
	}
	return c.declare(&engine.Set{Name: name, Type: typ, Comment: comment, Elements: elems})
}

func (c *Cycle) declare(s *engine.Set) string {
	c.sets[s.Name] = s
	c.scratch.declared = append(c.scratch.declared, s)
	return s.Name
}

// Sets returns the sets declared in this compile, by name.
func (c *Cycle) Sets() []engine.Set {
	names := make([]string, 0, len(c.sets))
	for n := range c.sets {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]engine.Set, 0, len(names))
	for _, n := range names {
		out = append(out, *c.sets[n])
	}
	return out
}

// Elements sorts keys and returns them as set elements, each once.
func Elements(keys []string) []engine.Element {
	if len(keys) == 0 {
		return nil
	}
	sort.Strings(keys)
	out := make([]engine.Element, 0, len(keys))
	for i, k := range keys {
		if i == 0 || k != keys[i-1] {
			out = append(out, engine.Element{Key: k})
		}
	}
	return out
}

// sameSets tells whether two lists of sets hold the same sets.
func sameSets(a, b []*engine.Set) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Name != y.Name || x.Type != y.Type || x.Interval != y.Interval || x.Comment != y.Comment || !slices.Equal(x.Elements, y.Elements) {
			return false
		}
	}
	return true
}

// SelectedPods joins selections, each pod once. The result may be the
// first selection's list: it must not be changed.
func SelectedPods(sels []selection.Selection) []*selection.Member {
	var pods []*selection.Member
	dup := false
	for i, sel := range sels {
		if i == 0 {
			pods = sel.Pods
		} else {
			if i == 1 {
				pods = append([]*selection.Member(nil), pods...)
			}
			pods = append(pods, sel.Pods...)
		}
		dup = dup || sel.Dup
	}
	if dup {
		// Pods sharing a key count once, as the first selected.
		pods = selection.Unique(pods)
	}
	// Otherwise a pod twice is the same pod, and its repeated addresses
	// are dropped with the repeated elements.
	return pods
}

// peerAddrs is the sorted set elements of the addresses that a list of
// pod selections selects, and the sets shared by every rule that selects
// them (made when first used).
type peerAddrs struct {
	key        string // the selections' keys as text
	base       string // the shared sets' name without the family
	v4, v6     []engine.Element
	set4, set6 *engine.Set
}

// peerAddrs returns the addresses of the pods that the selections (named
// by keys) select, and records the selections as what the rule being
// compiled read. Rules of many policies often select the same pods (every
// namespace, say): the elements are computed once per compile and kept
// across compiles while they stay the same, so that a pod event that
// changes no address changes no rule.
func (c *Cycle) peerAddrs(keys []selection.PeerKey, sels []selection.Selection) *peerAddrs {
	c.scratch.used = append(c.scratch.used, keys...)
	if len(keys) == 0 {
		return nil
	}
	ck := fmt.Sprint(keys)
	if pa := c.addrs[ck]; pa != nil {
		return pa
	}
	old := c.prev.addrs[ck]
	same := old != nil
	for _, k := range keys {
		if !same {
			break
		}
		same = c.sel.Unchanged(k)
	}
	if !same {
		var a4, a6 []string
		for _, p := range SelectedPods(sels) {
			a4 = append(a4, p.V4Text()...)
			a6 = append(a6, p.V6Text()...)
		}
		pa := &peerAddrs{key: ck, v4: Elements(a4), v6: Elements(a6)}
		if old == nil || !slices.Equal(old.v4, pa.v4) || !slices.Equal(old.v6, pa.v6) {
			old = pa
		}
	}
	c.addrs[ck], c.next.addrs[ck] = old, old
	return old
}

// PeerSets declares the sets of the addresses of the pods that the
// selections select, one per family that has any, and returns their names
// ("" for a family without addresses). The sets are named for the
// selections, not for a rule (prefix, "sel_", 16 hex digits of the
// SHA-256 of the selections' keys, "_4" or "_6"), so every rule of every
// policy that selects the same pods looks up the one set: 100 policies
// allowing every namespace cost the node one set, not 100 copies of it.
// A set lives while a rule of this compile uses it. Two different
// selections whose names collide (64 bits of a hash) are not shared: the
// second gets the rule's own sets, fallback(kind) with kind "pods4" or
// "pods6".
func (c *Cycle) PeerSets(prefix string, keys []selection.PeerKey, sels []selection.Selection, fallback func(kind string) string) (s4, s6 string) {
	pa := c.peerAddrs(keys, sels)
	if pa == nil {
		return "", ""
	}
	return c.share(pa, prefix+"sel_", "ipv4_addr", "ipv6_addr", "pods of ", fallback("pods4"), fallback("pods6"))
}

// share declares the shared sets of pa (named base, 16 hex digits of the
// hash of pa's key, and _4 or _6), or, when another key's sets have that
// name in this compile, sets of the fallback names.
func (c *Cycle) share(pa *peerAddrs, base, typ4, typ6, what, fallback4, fallback6 string) (s4, s6 string) {
	if pa.base == "" {
		sum := sha256.Sum256([]byte(pa.key))
		pa.base = base + hex.EncodeToString(sum[:8])
	}
	comment := nftsafe.Comment(what + pa.key)
	if o, taken := c.selNames[pa.base]; taken && o != pa {
		if len(pa.v4) > 0 {
			s4 = c.SharedSet(fallback4, typ4, pa.v4, comment)
		}
		if len(pa.v6) > 0 {
			s6 = c.SharedSet(fallback6, typ6, pa.v6, comment)
		}
		return s4, s6
	}
	if len(pa.v4) > 0 && pa.set4 == nil {
		pa.set4 = &engine.Set{Name: pa.base + "_4", Type: typ4, Comment: comment, Elements: pa.v4}
	}
	if len(pa.v6) > 0 && pa.set6 == nil {
		pa.set6 = &engine.Set{Name: pa.base + "_6", Type: typ6, Comment: comment, Elements: pa.v6}
	}
	c.useShared(pa.base, pa)
	c.scratch.shared = append(c.scratch.shared, pa)
	if pa.set4 != nil {
		s4 = pa.set4.Name
	}
	if pa.set6 != nil {
		s6 = pa.set6.Name
	}
	return s4, s6
}

// NamedSets declares the sets of egress named-port tuples of the pods the
// selections select (all: every pod of the cluster, for a rule without
// peers) and returns the matches that look them up. Like PeerSets, the
// sets are named for what they hold (prefix, "named_", a hash of the
// selections and the names with their protocols), so every rule that
// allows the same names towards the same pods shares them: 5,000
// namespaces each allowing egress to every namespace on a named port cost
// one set, not 5,000 copies of it. They are computed again only when the
// selections (or, for all, any pod) changed.
func (c *Cycle) NamedSets(prefix string, keys []selection.PeerKey, all bool, pods func() []*selection.Member, named NamedPorts, fallback func(kind string) string) []string {
	names := make([]string, 0, len(named))
	for np := range named {
		names = append(names, np.Name+"/"+string(np.Proto))
	}
	sort.Strings(names)
	c.scratch.used = append(c.scratch.used, keys...)
	ck := fmt.Sprint(keys)
	if all {
		ck = "*"
	}
	ck = "named ports " + strings.Join(names, ",") + " of " + ck // never a peerAddrs key: those start with "["
	pa := c.addrs[ck]
	if pa == nil {
		old := c.prev.addrs[ck]
		same := old != nil
		if all {
			same = same && !c.sel.PodsChanged()
		}
		for _, k := range keys {
			if !same {
				break
			}
			same = c.sel.Unchanged(k)
		}
		if !same {
			t4, t6 := NamedTuples(pods(), named)
			pa = &peerAddrs{key: ck, v4: Elements(t4), v6: Elements(t6)}
			if old != nil && slices.Equal(old.v4, pa.v4) && slices.Equal(old.v6, pa.v6) {
				pa = old
			}
		} else {
			pa = old
		}
		c.addrs[ck], c.next.addrs[ck] = pa, pa
	}
	s4, s6 := c.share(pa, prefix+"named_", "ipv4_addr . inet_proto . inet_service", "ipv6_addr . inet_proto . inet_service",
		"", fallback("named4"), fallback("named6"))
	var out []string
	if s4 != "" {
		out = append(out, "ip daddr . meta l4proto . th dport @"+s4)
	}
	if s6 != "" {
		out = append(out, "ip6 daddr . meta l4proto . th dport @"+s6)
	}
	return out
}

func sharedBase(pa *peerAddrs) string { return pa.base }

// useShared registers a selection's shared sets in this compile.
func (c *Cycle) useShared(base string, pa *peerAddrs) {
	c.selNames[base] = pa
	c.addrs[pa.key], c.next.addrs[pa.key] = pa, pa
	for _, s := range [2]*engine.Set{pa.set4, pa.set6} {
		if s != nil {
			c.sets[s.Name] = s
		}
	}
}

// NamedTuples resolves egress named ports on each destination pod: the
// address . protocol . port tuples of every pod, name and protocol the
// pod declares the name with, as set elements' text. It costs the pods'
// ports, not the names listed times the pods' ports.
func NamedTuples(pods []*selection.Member, named NamedPorts) (t4, t6 []string) {
	for _, p := range pods {
		named.Resolve(p.Obj, func(proto corev1.Protocol, port int32) {
			suffix := " . " + strings.ToLower(string(proto)) + " . " + strconv.Itoa(int(port))
			for _, a := range p.V4Text() {
				t4 = append(t4, a+suffix)
			}
			for _, a := range p.V6Text() {
				t6 = append(t6, a+suffix)
			}
		})
	}
	return t4, t6
}
