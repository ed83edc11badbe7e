package fqdn

import (
	"net/netip"
	"time"

	"github.com/miekg/dns"
)

// Bounds on what one answer can add (principle 8: a tenant chooses the
// names its pods resolve, and whoever serves those names chooses the
// answers).
const (
	// MaxAddrsPerAnswer is how many distinct addresses one answer can
	// add (to each rule it matches); the rest are ignored and counted. Large enough for
	// any real service's round robin, small enough to bound one batch.
	MaxAddrsPerAnswer = 2048
	// MaxChain is how many CNAME records are followed from the question
	// name; a longer chain adds nothing after it (resolvers give up
	// earlier, around 8 to 16).
	MaxChain = 16
	// MinTTL is the shortest time an element lives, whatever the answer
	// says: an answer with TTL 0 is still meant to be used once, and the
	// pod connects right after it reads the answer, so the element must
	// outlive that round trip (5 s covers a slow connect with a SYN
	// retransmission at 1 s and 3 s).
	MinTTL = 5 * time.Second
	// MaxTTL is the longest: a stale record must not open a destination
	// for longer than a day, and the kernel's timeouts stay well within
	// their 32-bit millisecond range.
	MaxTTL = 24 * time.Hour
)

// Reasons an answer adds nothing as a whole (Result.Ignored).
const (
	IgnoredNotResponse = "not_response" // the message is a query, not an answer
	IgnoredRcode       = "rcode"        // NXDOMAIN, SERVFAIL, REFUSED and the rest
	IgnoredTruncated   = "truncated"    // the pod will ask again over TCP
	IgnoredQuestion    = "question"     // not exactly one question of class IN
	IgnoredQtype       = "qtype"        // a question for neither A, AAAA nor ANY
	IgnoredNotSubject  = "not_subject"  // the pod is not (any longer) a subject
	IgnoredNoMatch     = "no_match"     // the question matches none of the pod's patterns
	IgnoredChain       = "chain"        // the CNAME chain loops or is longer than MaxChain
	IgnoredNoAddress   = "no_address"   // it matches, but the answer has no usable address
)

// Element is one "POD . ADDR" element of a rule's timeout set.
type Element struct {
	Set string
	// Key is the element as the engine writes set keys, e.g.
	// "10.0.0.1 . 192.0.2.7" or "fd00::1 . 2001:db8::7".
	Key string
	TTL time.Duration
	// Name is the question the answer was for (normalized): the name
	// that matched the rule's pattern, kept with the element.
	Name string
}

// Match is one element and why it is there.
type Match struct {
	Rule    *Rule
	Pattern Pattern // the rule's first pattern matching the question
	// Name is the owner of the address record: the question name, or
	// the end of the CNAME chain from it (normalized).
	Name string
	Addr netip.Addr
	Element
}

// Result is what one answer adds for one pod.
type Result struct {
	// Question is the normalized question name ("" if there is none).
	Question string
	// Matches are the elements, at most one per rule and address.
	Matches []Match
	// Ignored is why the answer added nothing as a whole (one of the
	// Ignored constants), "" if it added something.
	Ignored string
	// OverLimit counts addresses beyond MaxAddrsPerAnswer, NoPodAddr
	// addresses of a family the pod (or the rule) has no set of, once
	// per rule.
	OverLimit, NoPodAddr int
}

// Elements returns the elements resp, the answer the pod whose source
// address is pod received, adds to the sets of the pod's rules whose
// patterns match the question name. Only the question name and the
// records reached from it (the CNAME chain, then the A and AAAA records
// of its end that the question asked for) count: any other record in the
// answer is not the answer to what the pod asked, and is ignored.
// Each address lives for the smallest TTL along its chain, kept within
// [MinTTL, MaxTTL].
func (t *Table) Elements(pod netip.Addr, resp *dns.Msg) Result {
	var res Result
	if len(resp.Question) == 1 {
		res.Question = Normalize(resp.Question[0].Name)
	}
	switch {
	case !resp.Response:
		res.Ignored = IgnoredNotResponse
		return res
	case resp.Rcode != dns.RcodeSuccess:
		res.Ignored = IgnoredRcode
		return res
	case resp.Truncated:
		res.Ignored = IgnoredTruncated
		return res
	case len(resp.Question) != 1 || resp.Question[0].Qclass != dns.ClassINET:
		res.Ignored = IgnoredQuestion
		return res
	}
	qtype := resp.Question[0].Qtype
	if qtype != dns.TypeA && qtype != dns.TypeAAAA && qtype != dns.TypeANY {
		res.Ignored = IgnoredQtype
		return res
	}
	sub := t.Lookup(pod)
	if sub == nil {
		res.Ignored = IgnoredNotSubject
		return res
	}
	type ruleMatch struct {
		rule *Rule
		pat  Pattern
	}
	var rules []ruleMatch
	for _, r := range sub.Rules {
		for _, p := range r.Patterns {
			if p.Matches(res.Question) {
				rules = append(rules, ruleMatch{r, p})
				break
			}
		}
	}
	if len(rules) == 0 {
		res.Ignored = IgnoredNoMatch
		return res
	}

	// A resolver gives up on a chain that loops or goes on too long, so
	// nothing in such an answer is an address the pod will use.
	name, chainTTL, cut := followChain(resp.Answer, res.Question)
	if cut {
		res.Ignored = IgnoredChain
		return res
	}
	addrs := make(map[netip.Addr]time.Duration)
	var order []netip.Addr
	for _, rr := range resp.Answer {
		var a netip.Addr
		switch rr := rr.(type) {
		case *dns.A:
			if qtype == dns.TypeAAAA {
				continue
			}
			a, _ = netip.AddrFromSlice(rr.A.To4())
		case *dns.AAAA:
			if qtype == dns.TypeA {
				continue
			}
			a, _ = netip.AddrFromSlice(rr.AAAA.To16())
			if a.Is4In6() {
				continue // not an IPv6 destination; an A record says IPv4
			}
		default:
			continue
		}
		if !a.IsValid() || !sameName(rr.Header().Name, name) {
			continue
		}
		ttl := min(chainTTL, ttlOf(rr))
		if old, ok := addrs[a]; ok {
			addrs[a] = max(old, ttl)
			continue
		}
		if len(order) == MaxAddrsPerAnswer {
			res.OverLimit++
			continue
		}
		addrs[a] = ttl
		order = append(order, a)
	}
	for _, rm := range rules {
		for _, a := range order {
			set, p := rm.rule.Set4, sub.Addrs[0]
			if a.Is6() {
				set, p = rm.rule.Set6, sub.Addrs[1]
			}
			if set == "" || !p.IsValid() {
				res.NoPodAddr++
				continue
			}
			res.Matches = append(res.Matches, Match{
				Rule: rm.rule, Pattern: rm.pat, Name: name, Addr: a,
				Element: Element{Set: set, Key: p.String() + " . " + a.String(), TTL: clampTTL(addrs[a]), Name: res.Question},
			})
		}
	}
	if len(res.Matches) == 0 {
		res.Ignored = IgnoredNoAddress
	}
	return res
}

// Elements are the elements of the matches, in order.
func (r Result) Elements() []Element {
	out := make([]Element, len(r.Matches))
	for i, m := range r.Matches {
		out[i] = m.Element
	}
	return out
}

// followChain follows CNAME records from name through answer and returns
// the chain's end, the smallest TTL along it (MaxTTL without CNAMEs), and
// whether it was cut (a loop, or more than MaxChain hops). Each hop scans
// the answer, so the cost is at most MaxChain times its length.
func followChain(answer []dns.RR, name string) (string, time.Duration, bool) {
	ttl := MaxTTL
	seen := []string{name}
	for range MaxChain {
		var next *dns.CNAME
		for _, rr := range answer {
			if c, ok := rr.(*dns.CNAME); ok && sameName(c.Hdr.Name, name) {
				next = c
				break
			}
		}
		if next == nil {
			return name, ttl, false
		}
		target := Normalize(next.Target)
		for _, s := range seen {
			if s == target {
				return name, ttl, true
			}
		}
		ttl = min(ttl, ttlOf(next))
		name = target
		seen = append(seen, name)
	}
	// One more CNAME after MaxChain hops means the chain goes on.
	for _, rr := range answer {
		if c, ok := rr.(*dns.CNAME); ok && sameName(c.Hdr.Name, name) {
			return name, ttl, true
		}
	}
	return name, ttl, false
}

// sameName compares an owner name as a record presents it with a
// normalized name, label by label (see Normalize; no allocation for the
// common lower-case name).
func sameName(owner, normalized string) bool {
	if len(owner) > 0 && owner[len(owner)-1] == '.' {
		owner = owner[:len(owner)-1]
	}
	// The same text as a canonical form is the same name; else compare
	// the canonical forms.
	if owner == normalized {
		return normalized != invalidName
	}
	return Normalize(owner) == normalized
}

func ttlOf(rr dns.RR) time.Duration {
	return time.Duration(rr.Header().Ttl) * time.Second
}

func clampTTL(d time.Duration) time.Duration {
	return min(max(d, MinTTL), MaxTTL)
}
