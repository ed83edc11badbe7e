package doctor

import (
	"fmt"
	"sort"
	"strings"

	"github.com/nftguard/nftguard/engine/nftwire"
)

// Hook is a base chain of nftguard's own table: where foreign base chains
// compete with it.
type Hook struct {
	Hook     string // "forward", "postrouting"
	Type     string // "filter", "nat"
	Priority int32
}

// Config is what the checks compare the ruleset with.
type Config struct {
	Table string // our table, "inet nftguard"
	Hooks []Hook
}

// saveRestore is the consequence every rendering finding shares.
const saveRestore = "a save/restore cycle by any tool would change this rule"

// Check runs every check on a ruleset. It is pure.
func Check(rs *Ruleset, cfg Config) []Finding {
	var out []Finding
	out = append(out, checkOwnTable(rs, cfg)...)
	out = append(out, checkHooks(rs, cfg)...)
	out = append(out, checkIptables(rs)...)
	out = append(out, checkRendering(rs, cfg)...)
	return out
}

func checkOwnTable(rs *Ruleset, cfg Config) []Finding {
	for _, t := range rs.Tables {
		if t.String() == cfg.Table {
			rules := 0
			for _, c := range t.Chains {
				rules += len(c.Rules)
			}
			return []Finding{{Severity: Info, Check: "nftguard", Table: t.String(),
				Message: fmt.Sprintf("present: %d chains, %d rules, %d sets", len(t.Chains), rules, len(t.Sets))}}
		}
	}
	return []Finding{{Severity: Info, Check: "nftguard", Table: cfg.Table,
		Message: "not present: no policy is enforced by nftguard here", Advice: "run `nftguard apply` or the agent if this host should enforce"}}
}

// sameHookFamily reports whether a chain of this family sees the packets a
// chain of our inet table sees on the same hook.
func sameHookFamily(family string) bool {
	return family == "ip" || family == "ip6" || family == "inet"
}

func checkHooks(rs *Ruleset, cfg Config) []Finding {
	var out []Finding
	for _, t := range rs.Tables {
		if t.String() == cfg.Table || !sameHookFamily(t.Family) {
			continue
		}
		for _, c := range t.Chains {
			h, ok := competes(c, cfg.Hooks)
			if !ok {
				continue
			}
			f := Finding{Check: "hooks", Table: t.String(), Chain: c.Name}
			order := "after"
			if c.Priority < h.Priority {
				order = "before"
			} else if c.Priority == h.Priority {
				order = "in unspecified order with"
			}
			desc := fmt.Sprintf("%s chain on hook %s, priority %d (%s ours at %d), policy %s",
				c.Type, c.Hook, c.Priority, order, h.Priority, c.Policy)
			if h.Type == "nat" {
				f.Severity, f.Message = Info, desc
				if c.Priority <= h.Priority {
					f.Severity = Warning
					f.Message += ": its source NAT can bind a connection before nftguard's egress SNAT"
					f.Advice = "give nftguard's egress addresses precedence or move this chain after priority " + fmt.Sprint(h.Priority)
				}
				out = append(out, f)
				continue
			}
			switch {
			case c.Policy == "drop" && c.Hook == "input":
				// A host firewall's input chain that drops by default is
				// common and deliberate: it makes a pod's traffic to its
				// node stricter than nftguard's verdict, never more open.
				f.Severity = Warning
				f.Message = desc + ": a pod's traffic to this node that nftguard allows is still dropped unless this chain accepts it (a drop anywhere is final)"
				f.Advice = "accept in this chain what pods must reach on their node (e.g. the kubelet, a node-local DNS cache), or leave it to nftguard's policies"
				out = append(out, f)
			case c.Policy == "drop":
				f.Severity = Error
				f.Message = desc + ": every packet no rule of this chain accepts is dropped, also pod traffic nftguard allows (an accept only ends its own chain; a drop anywhere is final)"
				f.Advice = "accept pod traffic in this chain (e.g. the pod CIDR) or set its policy to accept"
				out = append(out, f)
			default:
				drops := 0
				for _, r := range c.Rules {
					if isDrop(r) && !unconditionalDrop(r) {
						drops++
					}
				}
				f.Severity = Info
				f.Message = desc
				if drops > 0 {
					f.Message += fmt.Sprintf("; %d conditional drop rule(s) here are final for matching traffic whatever nftguard decides", drops)
				}
				out = append(out, f)
			}
			for _, r := range c.Rules {
				if unconditionalDrop(r) {
					out = append(out, Finding{Severity: Error, Check: "hooks", Table: t.String(), Chain: c.Name, Handle: r.Handle, Rule: r.Text,
						Message: fmt.Sprintf("unconditional drop on hook %s: drops all %s traffic, also what nftguard allows", c.Hook, hookTraffic(c.Hook)),
						Advice:  "remove the rule or restrict it to traffic that is not pod traffic"})
				}
			}
		}
	}
	return out
}

// hookTraffic names the traffic a filter hook of ours sees.
func hookTraffic(hook string) string {
	if hook == "input" {
		return "locally delivered (pods to their node)"
	}
	return "forwarded"
}

// competes returns our hook a foreign base chain shares.
func competes(c *Chain, hooks []Hook) (Hook, bool) {
	if c.Hook == "" {
		return Hook{}, false
	}
	for _, h := range hooks {
		if h.Hook == c.Hook && (h.Type == c.Type || (h.Type == "filter" && c.Type == "route")) {
			return h, true
		}
	}
	return Hook{}, false
}

// isDrop reports whether a rule ends in drop (or an xt DROP/REJECT).
func isDrop(r *Rule) bool {
	if len(r.Exprs) == 0 {
		return false
	}
	switch v := r.Exprs[len(r.Exprs)-1].Value.(type) {
	case *nftwire.Verdict:
		return v.Kind == nftwire.VerdictDrop
	case *nftwire.Reject:
		return true
	case *nftwire.Target:
		return v.Name == "REJECT" || v.Name == "DROP"
	}
	return false
}

// unconditionalDrop reports whether a rule drops every packet: nothing but
// counters and logging before the drop.
func unconditionalDrop(r *Rule) bool {
	if !isDrop(r) {
		return false
	}
	for _, e := range r.Exprs[:len(r.Exprs)-1] {
		switch e.Value.(type) {
		case *nftwire.Counter, *nftwire.Log:
		default:
			return false
		}
	}
	return true
}

// xtablesTables are the tables iptables-nft (and ebtables/arptables-nft)
// create; their chains are what iptables-nft-save prints.
var xtablesTables = map[string]bool{"filter": true, "nat": true, "mangle": true, "raw": true, "security": true, "broute": true}

func isIptablesNFT(t *Table) bool {
	if t.Family == "inet" || t.Family == "netdev" || !xtablesTables[t.Name] {
		return false
	}
	for _, c := range t.Chains {
		if c.Hook != "" && c.Name == strings.ToUpper(c.Name) {
			return true
		}
	}
	return false
}

func checkIptables(rs *Ruleset) []Finding {
	var out []Finding
	var nftTables []string
	for _, t := range rs.Tables {
		if !isIptablesNFT(t) {
			continue
		}
		n := 0
		for _, c := range t.Chains {
			n += len(c.Rules)
		}
		if n == 0 {
			continue // chains without rules program nothing
		}
		nftTables = append(nftTables, fmt.Sprintf("%s (%d rules)", t, n))
	}
	var legacyTables []string
	for _, l := range rs.Legacy {
		if l.Rules != 0 {
			legacyTables = append(legacyTables, fmt.Sprintf("%s %s (%s)", l.Family, l.Name, entries(l.Rules)))
		}
	}
	if rs.LegacyErr != "" {
		out = append(out, Finding{Severity: Warning, Check: "iptables", Message: "could not read the iptables-legacy tables: " + rs.LegacyErr})
	}
	switch {
	case len(legacyTables) > 0 && len(nftTables) > 0:
		out = append(out, Finding{Severity: Warning, Check: "iptables",
			Message: fmt.Sprintf("iptables-legacy rules [%s] and iptables-nft rules [%s] at the same time: two iptables userspaces program this host; each one's save shows only its own half, and the kernel runs both",
				strings.Join(legacyTables, ", "), strings.Join(nftTables, ", ")),
			Advice: "make every component (kube-proxy, CNI, host firewall) use the same iptables backend, the one the host's iptables links to"})
	case len(legacyTables) > 0:
		out = append(out, Finding{Severity: Info, Check: "iptables",
			Message: fmt.Sprintf("iptables-legacy rules: %s", strings.Join(legacyTables, ", "))})
	case len(nftTables) > 0:
		out = append(out, Finding{Severity: Info, Check: "iptables",
			Message: fmt.Sprintf("iptables-nft rules: %s", strings.Join(nftTables, ", "))})
	}
	return out
}

func entries(n int) string {
	if n < 0 {
		return "entries unknown"
	}
	return fmt.Sprintf("%d entries beyond the built-in policies", n)
}

// checkRendering finds rules that some userspace cannot print faithfully,
// so that saving and restoring them changes them.
func checkRendering(rs *Ruleset, cfg Config) []Finding {
	var out []Finding
	for _, t := range rs.Tables {
		if t.String() == cfg.Table {
			continue
		}
		xt := isIptablesNFT(t)
		for _, c := range t.Chains {
			for _, r := range c.Rules {
				for _, p := range ruleProblems(r, xt) {
					out = append(out, Finding{Severity: p.sev, Check: "rendering", Table: t.String(), Chain: c.Name,
						Handle: r.Handle, Rule: r.Text, Message: p.msg + ": " + saveRestore, Advice: p.advice})
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Severity > out[j].Severity })
	return out
}

type problem struct {
	sev    Severity
	msg    string
	advice string
}

// ruleProblems lists what of one rule a userspace may mis-render. xt says
// the rule lives in an iptables-nft chain, which iptables-nft-save prints
// and iptables-nft-restore writes back.
func ruleProblems(r *Rule, xt bool) []problem {
	var out []problem
	for i, e := range r.Exprs {
		switch v := e.Value.(type) {
		case nil:
			out = append(out, problem{Warning, fmt.Sprintf("expression %q is unknown to nftguard's decoder (%s)", e.Name, e.Err),
				"check which tool wrote it; an older nft or iptables cannot print it either"})
		case *nftwire.Match:
			out = append(out, problem{Warning, xtMessage("match", v.Name, v.Rev), xtAdvice})
		case *nftwire.Target:
			out = append(out, problem{Warning, xtMessage("target", v.Name, v.Rev), xtAdvice})
		case *nftwire.Meta:
			if xt && v.Key == nftwire.MetaKeyMARK && i+1 < len(r.Exprs) && r.Exprs[i+1].Name == "bitwise" {
				out = append(out, problem{Warning,
					"native `meta mark & mask` match, as iptables-nft 1.8.8 and later write `-m mark --mark V/M`: iptables-nft 1.8.7 and older do not recognise it and save the rule without the match (the kube-router 1.8.7/1.8.8 failure; for a DROP rule, a bare `-j DROP`)",
					"run one iptables version on the host and in every container that saves or restores these tables"})
			}
		default:
			if xt && !iptablesExpressible(e) {
				out = append(out, problem{Error,
					fmt.Sprintf("native nft expression %q inside an iptables-nft chain: iptables-nft-save cannot express it and prints the rule without it (`ip saddr @s drop` saves as a bare `-j DROP`)", e.Name),
					"move this rule to a table of its own; never add nft rules to iptables-nft's tables"})
			}
		}
	}
	return out
}

const xtAdvice = "use one iptables version everywhere these rules are saved and restored, or the native nft equivalent in a table of your own"

func xtMessage(kind, name string, rev uint32) string {
	m := fmt.Sprintf("xtables compat %s %q revision %d: its data is a binary blob whose layout only a userspace that knows this revision can print (nft shows `xt %s %s`)", kind, name, rev, kind, name)
	if name == "mark" || name == "MARK" {
		m += " (the iptables 1.8.7/1.8.8 failure: a userspace that writes or expects another form of mark cannot save this rule as written)"
	}
	return m
}

// iptablesExpressible reports whether iptables-nft (any 1.8 release) writes
// and saves this native expression itself: loads and comparisons of header
// fields and interfaces, counters and verdicts. Anything else (set lookups,
// maps, ct, nat, quota, ...) is something only nft wrote.
func iptablesExpressible(e Expr) bool {
	switch v := e.Value.(type) {
	case *nftwire.Payload, *nftwire.Cmp, *nftwire.Bitwise, *nftwire.Counter, *nftwire.Verdict, *nftwire.Immediate, *nftwire.Meta, *nftwire.Range:
		return true
	case *nftwire.Lookup:
		// iptables-nft uses anonymous sets for some matches, never a
		// named set.
		return strings.HasPrefix(v.SetName, "__set")
	}
	return false
}
