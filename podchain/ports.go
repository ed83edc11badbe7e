package podchain

import (
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/podset"
)

// PortEntry is one port of a rule as written: a protocol (tcp, udp or
// sctp, as nft names it) and either every port of it (All) or the ports
// From to To.
type PortEntry struct {
	Proto    string
	All      bool
	From, To int32
}

// PortMatches returns the port matches of a rule's numbered ports, one per
// protocol, in the order the protocols first appear: "meta l4proto tcp"
// when a port of the protocol has no number (it covers the numbered ones),
// else the protocol's ranges merged, inline when they are one range
// ("tcp dport 80", "tcp dport 80-90"), else a lookup in a named interval
// set of the rule ("tcp dport @NAME"), which setName names. So a rule
// costs at most three matches however many ports it lists, and each port
// is one element: a policy of 20,000 ports is a few rules per peer, not
// 20,000. No entries gives no matches (a rule whose ports are all named
// matches through its named ports alone).
//
// A rule compiled again (its peers' pods changed) has the ports it had:
// its policy object is the same. Its previous matches and sets are taken
// as they are, so an event costs the rule's peers, not its ports.
func (c *Cycle) PortMatches(entries []PortEntry, setName func(proto string) string, comment string) []string {
	if pm := c.scratch.prevPorts; pm != nil && c.redeclare(pm.sets) {
		c.scratch.ports = pm
		return pm.matches
	}
	declared := len(c.scratch.declared)
	out := c.portMatches(entries, setName, comment)
	c.scratch.ports = &portsMemo{matches: out, sets: slices.Clone(c.scratch.declared[declared:])}
	return out
}

// portsMemo is what PortMatches gave for a rule.
type portsMemo struct {
	matches []string
	sets    []*engine.Set
}

// redeclare declares sets again unless a name is taken in this compile.
func (c *Cycle) redeclare(sets []*engine.Set) bool {
	for _, s := range sets {
		if _, taken := c.sets[s.Name]; taken {
			return false
		}
	}
	for _, s := range sets {
		c.declare(s)
	}
	return true
}

func (c *Cycle) portMatches(entries []PortEntry, setName func(proto string) string, comment string) []string {
	var protos []string
	all := map[string]bool{}
	ranges := map[string][][2]int32{}
	for _, e := range entries {
		if _, seen := ranges[e.Proto]; !seen && !all[e.Proto] {
			protos = append(protos, e.Proto)
			ranges[e.Proto] = nil
		}
		if e.All {
			all[e.Proto] = true
			continue
		}
		ranges[e.Proto] = append(ranges[e.Proto], [2]int32{e.From, e.To})
	}
	out := make([]string, 0, len(protos))
	for _, p := range protos {
		if all[p] {
			out = append(out, "meta l4proto "+p)
			continue
		}
		rs := mergePorts(ranges[p])
		if len(rs) == 1 {
			out = append(out, p+" dport "+portText(rs[0]))
			continue
		}
		// In the order nft lists them: by number.
		elems := make([]engine.Element, len(rs))
		for i, r := range rs {
			elems[i] = engine.Element{Key: portText(r)}
		}
		name := setName(p)
		if _, ok := c.sets[name]; ok {
			c.scratch.collided = true
		} else {
			c.declare(&engine.Set{Name: name, Type: "inet_service", Interval: true, Comment: comment, Elements: elems})
		}
		out = append(out, p+" dport @"+name)
	}
	return out
}

// mergePorts sorts ranges and merges those that overlap or touch: an
// interval set refuses overlapping elements, and nft lists touching ones
// as one.
func mergePorts(rs [][2]int32) [][2]int32 {
	sort.Slice(rs, func(i, j int) bool { return rs[i][0] < rs[j][0] })
	out := rs[:0:0]
	for _, r := range rs {
		if n := len(out); n > 0 && r[0] <= out[n-1][1]+1 {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

func portText(r [2]int32) string {
	if r[0] == r[1] {
		return strconv.Itoa(int(r[0]))
	}
	return strconv.Itoa(int(r[0])) + "-" + strconv.Itoa(int(r[1]))
}

// NamedPorts is a rule's named ports, indexed by name and protocol, so
// that resolving them on a pod costs the pod's ports, not the names the
// rule lists times the pod's ports.
type NamedPorts map[NamedPort]bool

// NewNamedPorts indexes a rule's named ports.
func NewNamedPorts(named []NamedPort) NamedPorts {
	n := make(NamedPorts, len(named))
	for _, np := range named {
		n[np] = true
	}
	return n
}

// Resolve calls f for each name and protocol of the rule that p declares,
// with the port it resolves to: the first of p's ports of that name and
// protocol (podset.Pod.NamedPort), once.
func (n NamedPorts) Resolve(p *podset.Pod, f func(proto corev1.Protocol, port int32)) {
	var seen map[NamedPort]bool
	for _, pp := range p.Ports {
		k := NamedPort{Name: pp.Name, Proto: pp.Protocol}
		if !n[k] || seen[k] {
			continue
		}
		if seen == nil {
			seen = map[NamedPort]bool{}
		}
		seen[k] = true
		f(pp.Protocol, pp.Number)
	}
}

// Matches are the port matches of the named ports resolved on the
// destination pod dst (ingress), each distinct port once.
func (n NamedPorts) Matches(dst *podset.Pod) []string {
	var out []string
	n.Resolve(dst, func(proto corev1.Protocol, port int32) {
		m := strings.ToLower(string(proto)) + " dport " + strconv.Itoa(int(port))
		for _, o := range out {
			if o == m {
				return
			}
		}
		out = append(out, m)
	})
	return out
}

// NamedPort is a port name and one protocol it may be declared with.
type NamedPort struct {
	Name  string
	Proto corev1.Protocol
}
