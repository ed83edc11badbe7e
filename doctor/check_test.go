package doctor

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables/xt"

	"github.com/nftguard/nftguard/engine/nftwire"
)

// ex wraps a decoded expression the way Read records it.
func ex(name string, v nftwire.Expr) Expr { return Expr{Name: name, Value: v} }

var (
	drop      = ex("immediate", &nftwire.Verdict{Kind: nftwire.VerdictDrop})
	accept    = ex("immediate", &nftwire.Verdict{Kind: nftwire.VerdictAccept})
	counter   = ex("counter", &nftwire.Counter{})
	saddr     = ex("payload", &nftwire.Payload{Base: nftwire.PayloadBaseNetworkHeader, Offset: 12, Len: 4, DestRegister: 1})
	cmpAddr   = ex("cmp", &nftwire.Cmp{Op: nftwire.CmpOpEq, Register: 1, Data: []byte{10, 0, 0, 1}})
	markLoad  = ex("meta", &nftwire.Meta{Key: nftwire.MetaKeyMARK, Register: 1})
	markMask  = ex("bitwise", &nftwire.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: le32(0x8000), Xor: le32(0)})
	markCmp   = ex("cmp", &nftwire.Cmp{Op: nftwire.CmpOpEq, Register: 1, Data: le32(0x8000)})
	lookupSet = ex("lookup", &nftwire.Lookup{SourceRegister: 1, SetName: "s"})
	anonSet   = ex("lookup", &nftwire.Lookup{SourceRegister: 1, SetName: "__set0"})
	xtMark    = ex("match", &nftwire.Match{Name: "mark", Rev: 1, Info: &xt.Unknown{}})
	xtMasq    = ex("target", &nftwire.Target{Name: "MASQUERADE", Rev: 0, Info: &xt.Unknown{}})
	ctState   = ex("ct", &nftwire.Ct{Key: nftwire.CtKeySTATE, Register: 1})
	unknown   = Expr{Name: "inner", Err: "unknown expression"}
)

func le32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

func rule(h uint64, exprs ...Expr) *Rule {
	r := &Rule{Handle: h, Exprs: exprs}
	return r
}

func iptFilter(rules ...*Rule) *Table {
	return &Table{Family: "ip", Name: "filter", Chains: []*Chain{
		{Name: "FORWARD", Type: "filter", Hook: "forward", Policy: "accept", Rules: rules},
	}}
}

var cfg = Config{Table: "inet nftguard", Hooks: []Hook{{"forward", "filter", 0}, {"postrouting", "nat", 90}}}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		rs   Ruleset
		want []string // "severity check substring"
		not  []string // severity+check pairs that must not appear
		// hooks, when set, are ours instead of cfg's.
		hooks []Hook
	}{
		{name: "empty",
			want: []string{"info nftguard not present"},
			not:  []string{"warning", "error"}},
		{name: "our own table is not foreign",
			rs: Ruleset{Tables: []*Table{{Family: "inet", Name: "nftguard", Chains: []*Chain{
				{Name: "np_forward", Type: "filter", Hook: "forward", Policy: "accept", Rules: []*Rule{rule(1, lookupSet, drop), rule(2, drop)}}}}}},
			want: []string{"info nftguard present: 1 chains, 2 rules"},
			not:  []string{"warning", "error", "info hooks"}},
		{name: "policy drop on forward",
			rs:   Ruleset{Tables: []*Table{{Family: "inet", Name: "fw", Chains: []*Chain{{Name: "fwd", Type: "filter", Hook: "forward", Priority: -10, Policy: "drop"}}}}},
			want: []string{"error hooks priority -10 (before ours at 0), policy drop"}},
		{name: "unconditional drop rule after ours",
			rs:   Ruleset{Tables: []*Table{{Family: "ip6", Name: "fw", Chains: []*Chain{{Name: "fwd", Type: "filter", Hook: "forward", Priority: 10, Policy: "accept", Rules: []*Rule{rule(7, counter, drop)}}}}}},
			want: []string{"error hooks unconditional drop", "info hooks priority 10 (after ours at 0), policy accept"}},
		{name: "conditional drops are information",
			rs:   Ruleset{Tables: []*Table{{Family: "inet", Name: "fw", Chains: []*Chain{{Name: "fwd", Type: "filter", Hook: "forward", Policy: "accept", Rules: []*Rule{rule(7, saddr, cmpAddr, drop)}}}}}},
			want: []string{"info hooks 1 conditional drop rule(s)"},
			not:  []string{"error", "warning"}},
		{name: "other hooks and families do not compete",
			rs: Ruleset{Tables: []*Table{
				{Family: "inet", Name: "fw", Chains: []*Chain{{Name: "in", Type: "filter", Hook: "input", Policy: "drop"}}},
				{Family: "bridge", Name: "br", Chains: []*Chain{{Name: "fwd", Type: "filter", Hook: "forward", Policy: "drop"}}},
			}},
			not: []string{"error", "warning", "info hooks"}},
		{name: "a host firewall's input policy drop is a warning, not an error",
			hooks: OwnHooks(),
			rs:    Ruleset{Tables: []*Table{{Family: "inet", Name: "fw", Chains: []*Chain{{Name: "in", Type: "filter", Hook: "input", Policy: "drop"}}}}},
			want:  []string{"warning hooks hook input, priority 0 (in unspecified order with ours at 0), policy drop: a pod's traffic to this node"},
			not:   []string{"error"}},
		{name: "an unconditional drop on input is an error",
			hooks: OwnHooks(),
			rs:    Ruleset{Tables: []*Table{{Family: "ip", Name: "fw", Chains: []*Chain{{Name: "in", Type: "filter", Hook: "input", Priority: 10, Policy: "accept", Rules: []*Rule{rule(7, counter, drop)}}}}}},
			want:  []string{"error hooks unconditional drop on hook input: drops all locally delivered (pods to their node) traffic"}},
		{name: "source NAT before ours",
			rs:   Ruleset{Tables: []*Table{{Family: "ip", Name: "fw", Chains: []*Chain{{Name: "post", Type: "nat", Hook: "postrouting", Priority: 50, Policy: "accept"}}}}},
			want: []string{"warning hooks can bind a connection before"}},
		{name: "source NAT after ours",
			rs:   Ruleset{Tables: []*Table{{Family: "ip", Name: "nat", Chains: []*Chain{{Name: "POSTROUTING", Type: "nat", Hook: "postrouting", Priority: 100, Policy: "accept", Rules: []*Rule{rule(3, saddr, cmpAddr, counter, xtMasq)}}}}}},
			want: []string{"info hooks priority 100 (after ours at 90)", `warning rendering target "MASQUERADE" revision 0`, "info iptables iptables-nft rules: ip nat (1 rules)"}},
		{name: "native mark match in an iptables-nft chain",
			rs:   Ruleset{Tables: []*Table{iptFilter(rule(2, markLoad, markMask, markCmp, counter, drop))}},
			want: []string{"warning rendering native `meta mark & mask`"}},
		{name: "native mark match outside iptables-nft is fine",
			rs:  Ruleset{Tables: []*Table{{Family: "inet", Name: "mine", Chains: []*Chain{{Name: "c", Rules: []*Rule{rule(2, markLoad, markMask, markCmp, drop)}}}}}},
			not: []string{"warning", "error"}},
		{name: "xt mark revision",
			rs:   Ruleset{Tables: []*Table{iptFilter(rule(2, xtMark, counter, drop))}},
			want: []string{`warning rendering match "mark" revision 1`, "warning rendering the iptables 1.8.7/1.8.8 failure"}},
		{name: "named set lookup in iptables-nft chain",
			rs:   Ruleset{Tables: []*Table{iptFilter(rule(5, saddr, lookupSet, drop))}},
			want: []string{`error rendering native nft expression "lookup"`}},
		{name: "anonymous set lookup is iptables' own",
			rs:  Ruleset{Tables: []*Table{iptFilter(rule(5, saddr, anonSet, drop))}},
			not: []string{"error rendering", "warning rendering"}},
		{name: "ct in iptables-nft chain",
			rs:   Ruleset{Tables: []*Table{iptFilter(rule(5, ctState, accept))}},
			want: []string{`error rendering native nft expression "ct"`}},
		{name: "unknown expression anywhere",
			rs:   Ruleset{Tables: []*Table{{Family: "inet", Name: "mine", Chains: []*Chain{{Name: "c", Rules: []*Rule{rule(2, unknown, accept)}}}}}},
			want: []string{`warning rendering expression "inner" is unknown`}},
		{name: "legacy and nft side by side",
			rs:   Ruleset{Tables: []*Table{iptFilter(rule(2, counter, accept))}, Legacy: []LegacyTable{{Family: "ip", Name: "filter", Rules: 3}}},
			want: []string{"warning iptables iptables-legacy rules [ip filter (3 entries", "warning iptables iptables-nft rules [ip filter (1 rules)]"}},
		{name: "empty legacy tables do not count",
			rs:  Ruleset{Tables: []*Table{iptFilter(rule(2, counter, accept))}, Legacy: []LegacyTable{{Family: "ip", Name: "filter", Rules: 0}}},
			not: []string{"warning iptables"}},
		{name: "legacy only",
			rs:   Ruleset{Legacy: []LegacyTable{{Family: "ip6", Name: "nat", Rules: 2}}},
			want: []string{"info iptables iptables-legacy rules: ip6 nat"}},
		{name: "legacy unreadable",
			rs:   Ruleset{LegacyErr: "permission denied"},
			want: []string{"warning iptables could not read"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfg
			if tt.hooks != nil {
				c.Hooks = tt.hooks
			}
			got := Check(&tt.rs, c)
			var lines []string
			for _, f := range got {
				lines = append(lines, f.Severity.String()+" "+f.Check+" "+f.Message)
			}
			all := strings.Join(lines, "\n")
			for _, w := range tt.want {
				sev, rest, _ := strings.Cut(w, " ")
				check, sub, _ := strings.Cut(rest, " ")
				found := false
				for _, f := range got {
					if f.Severity.String() == sev && f.Check == check && strings.Contains(f.Message, sub) {
						found = true
					}
				}
				if !found {
					t.Errorf("missing %q in:\n%s", w, all)
				}
			}
			for _, n := range tt.not {
				for _, l := range lines {
					if strings.HasPrefix(l, n) {
						t.Errorf("unexpected %q: %s", n, l)
					}
				}
			}
			for _, f := range got {
				if f.Check == "rendering" && (!strings.Contains(f.Message, saveRestore) || f.Handle == 0) {
					t.Errorf("rendering finding without the consequence or the rule: %+v", f)
				}
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	for _, tt := range []struct {
		family string
		exprs  []Expr
		want   string
	}{
		{"ip", []Expr{saddr, cmpAddr, counter, drop}, "ip saddr 10.0.0.1 counter drop"},
		{"ip", []Expr{saddr, lookupSet, drop}, "ip saddr @s drop"},
		{"ip", []Expr{markLoad, markMask, markCmp, counter, drop}, "meta mark & 0x8000 == 0x8000 counter drop"},
		{"ip", []Expr{xtMark, ex("immediate", &nftwire.Verdict{Kind: nftwire.VerdictJump, Chain: "KUBE"})}, `xt match "mark" rev 1 jump KUBE`},
		{"ip", []Expr{unknown, accept}, "inner accept"},
	} {
		if got := describe(tt.family, tt.exprs); got != tt.want {
			t.Errorf("describe = %q, want %q", got, tt.want)
		}
	}
}

func TestUnconditionalDrop(t *testing.T) {
	for _, tt := range []struct {
		r    *Rule
		want bool
	}{
		{rule(1, drop), true},
		{rule(1, counter, ex("log", &nftwire.Log{}), drop), true},
		{rule(1, counter, ex("target", &nftwire.Target{Name: "REJECT"})), true},
		{rule(1, saddr, cmpAddr, drop), false},
		{rule(1, counter, accept), false},
		{rule(1), false},
	} {
		if got := unconditionalDrop(tt.r); got != tt.want {
			t.Errorf("unconditionalDrop(%s) = %v", describe("ip", tt.r.Exprs), got)
		}
	}
}

func TestDiffElements(t *testing.T) {
	b := func(s ...string) [][]byte {
		var out [][]byte
		for _, x := range s {
			out = append(out, []byte(x))
		}
		return out
	}
	for _, tt := range []struct {
		want, got      [][]byte
		missing, extra int
	}{
		{nil, nil, 0, 0},
		{b("a", "b"), b("a", "b"), 0, 0},
		{b("a", "b", "c"), b("b", "d"), 2, 1},
		{nil, b("x"), 0, 1},
	} {
		if m, e := diffElements(tt.want, tt.got); m != tt.missing || e != tt.extra {
			t.Errorf("diffElements(%q, %q) = %d, %d", tt.want, tt.got, m, e)
		}
	}
}

// texts are the differences' texts; opening those that may open traffic.
func texts(ds []difference) (all, opening []string) {
	for _, d := range ds {
		all = append(all, d.text)
		if d.opens {
			opening = append(opening, d.text)
		}
	}
	return all, opening
}

func TestDiffTables(t *testing.T) {
	want := &Table{Family: "inet", Name: "nftguard",
		Chains: []*Chain{{Name: "a", Hook: "forward", Type: "filter", Policy: "accept", Rules: []*Rule{{Raw: []byte{1}, Text: "r1"}, {Raw: []byte{2}, Text: "r2"}}}},
		Sets:   []*Set{{Name: "s", Elements: [][]byte{{1}}}}}
	same := &Table{Family: "inet", Name: "nftguard",
		Chains: []*Chain{{Name: "a", Hook: "forward", Type: "filter", Policy: "accept", Rules: []*Rule{{Handle: 9, Raw: []byte{1}}, {Handle: 10, Raw: []byte{2}}}}},
		Sets:   []*Set{{Name: "s", Elements: [][]byte{{1}}}}}
	if d := diffTables(want, same); len(d) != 0 {
		t.Errorf("handles must not matter: %v", d)
	}
	changed := &Table{Family: "inet", Name: "nftguard",
		Chains: []*Chain{{Name: "a", Hook: "forward", Type: "filter", Policy: "drop", Rules: []*Rule{{Handle: 9, Raw: []byte{3}, Text: "x"}}}, {Name: "b"}},
		Sets:   []*Set{{Name: "t"}}}
	all, _ := texts(diffTables(want, changed))
	d := strings.Join(all, "\n")
	for _, w := range []string{"policy drop, want", `rule 1 (handle 9) is "x", want "r1"`, "rule 2 is missing: r2", "extra chain b", "set s is missing", "extra set t"} {
		if !strings.Contains(d, w) {
			t.Errorf("diff lacks %q:\n%s", w, d)
		}
	}
	if d, _ := texts(diffTables(want, nil)); len(d) != 1 || d[0] != "the table is missing" {
		t.Errorf("missing table: %q", d)
	}
}

// TestDiffRules: rules are aligned, not compared by position, and every
// difference that may let through what the manifests stop says so.
func TestDiffRules(t *testing.T) {
	r := func(b byte, text string, exprs ...Expr) *Rule {
		return &Rule{Handle: uint64(b) + 100, Raw: []byte{b}, Text: text, Exprs: exprs}
	}
	vmap := ex("lookup", &nftwire.Lookup{SourceRegister: 1, SetName: "m", IsDestRegSet: true})
	want := []*Rule{r(1, "dispatch", saddr, vmap), r(2, "allow", saddr, cmpAddr, accept), r(3, "deny", drop), r(4, "count", counter)}
	chain := func(h string, rules ...*Rule) *Table {
		return &Table{Family: "inet", Name: "nftguard", Chains: []*Chain{{Name: "c", Hook: h, Type: "filter", Policy: "accept", Rules: rules}}}
	}
	for _, tt := range []struct {
		name    string
		got     *Table
		all     []string
		opening []string
	}{
		{"inserted accept", chain("forward", want[0], r(9, "sneak", accept), want[1], want[2], want[3]),
			[]string{"chain c: extra rule (handle 109): sneak"}, []string{"chain c: extra rule (handle 109): sneak"}},
		{"inserted drop", chain("forward", r(9, "block", saddr, cmpAddr, drop), want[0], want[1], want[2], want[3]),
			[]string{"chain c: extra rule (handle 109): block"}, nil},
		{"inserted xt target", chain("forward", want[0], want[1], want[2], want[3], r(9, "xt", counter, xtMasq)),
			[]string{"chain c: extra rule (handle 109): xt"}, []string{"chain c: extra rule (handle 109): xt"}},
		{"inserted counter", chain("forward", want[0], want[1], want[2], r(9, "count2", counter), want[3]),
			[]string{"chain c: extra rule (handle 109): count2"}, nil},
		{"lost drop", chain("forward", want[0], want[1], want[3]),
			[]string{"chain c: rule 3 is missing: deny"}, []string{"chain c: rule 3 is missing: deny"}},
		{"lost dispatch", chain("forward", want[1], want[2], want[3]),
			[]string{"chain c: rule 1 is missing: dispatch"}, []string{"chain c: rule 1 is missing: dispatch"}},
		{"lost accept", chain("forward", want[0], want[2], want[3]),
			[]string{"chain c: rule 2 is missing: allow"}, nil},
		{"drop changed to accept", chain("forward", want[0], want[1], r(9, "open", accept), want[3]),
			[]string{`chain c: rule 3 (handle 109) is "open", want "deny"`}, []string{`chain c: rule 3 (handle 109) is "open", want "deny"`}},
		{"moved to another hook", chain("input", want...),
			[]string{"chain c: hook filter input priority 0 policy accept, want hook filter forward priority 0 policy accept"},
			[]string{"chain c: hook filter input priority 0 policy accept, want hook filter forward priority 0 policy accept"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			all, opening := texts(diffTables(chain("forward", want...), tt.got))
			if !slices.Equal(all, tt.all) || !slices.Equal(opening, tt.opening) {
				t.Errorf("got %q, opening %q; want %q, opening %q", all, opening, tt.all, tt.opening)
			}
		})
	}

	extra := chain("forward", want...)
	extra.Chains = append(extra.Chains, &Chain{Name: "sneak", Hook: "prerouting", Type: "filter", Policy: "accept", Rules: []*Rule{r(9, "x", accept)}}, &Chain{Name: "spare"})
	all, opening := texts(diffTables(chain("forward", want...), extra))
	if w := []string{"extra base chain sneak (filter hook prerouting priority 0 policy accept, 1 rules)", "extra chain spare"}; !slices.Equal(all, w) || !slices.Equal(opening, w[:1]) {
		t.Errorf("extra chains: %q, opening %q", all, opening)
	}
}

func TestCommonRules(t *testing.T) {
	rules := func(s string) []*Rule {
		var out []*Rule
		for _, c := range []byte(s) {
			out = append(out, &Rule{Raw: []byte{c}})
		}
		return out
	}
	for _, tt := range []struct {
		a, b string
		n    int
	}{
		{"", "", 0}, {"abc", "abc", 3}, {"abc", "aXbc", 3}, {"abcd", "acbd", 3}, {"abc", "xyz", 0}, {"aaab", "ab", 2},
	} {
		got := commonRules(rules(tt.a), rules(tt.b))
		if len(got) != tt.n {
			t.Errorf("commonRules(%q, %q) = %v, want %d pairs", tt.a, tt.b, got, tt.n)
		}
		for k, p := range got {
			if tt.a[p[0]] != tt.b[p[1]] || (k > 0 && (p[0] <= got[k-1][0] || p[1] <= got[k-1][1])) {
				t.Errorf("commonRules(%q, %q) = %v: not a common subsequence", tt.a, tt.b, got)
			}
		}
	}
}

func TestParseGetInfo(t *testing.T) {
	b := make([]byte, getInfoSize)
	copy(b, "filter")
	binary.NativeEndian.PutUint32(b[32:], 1<<1|1<<2|1<<3) // INPUT, FORWARD, OUTPUT
	for _, tt := range []struct {
		entries uint32
		want    int
	}{{4, 0}, {5, 1}, {9, 5}, {2, 0}} {
		binary.NativeEndian.PutUint32(b[32+4+40:], tt.entries)
		if got, err := parseGetInfo(b); err != nil || got != tt.want {
			t.Errorf("entries %d: got %d, %v; want %d", tt.entries, got, err, tt.want)
		}
	}
	if _, err := parseGetInfo(b[:10]); err == nil {
		t.Error("short buffer accepted")
	}
}

func TestLastSync(t *testing.T) {
	for _, tt := range []struct {
		text string
		want time.Time
		ok   bool
		err  bool
	}{
		{"# HELP x\nnftguard_last_sync_success_timestamp_seconds 1700000000.5\n", time.Unix(1700000000, 5e8), true, false},
		{`nftguard_last_sync_success_timestamp_seconds{node="n1"} 1700000000` + "\n", time.Unix(1700000000, 0), true, false},
		{"nftguard_last_sync_success_timestamp_seconds_total 5\nother 1\n", time.Time{}, false, false},
		{"nftguard_last_sync_success_timestamp_seconds NaN\n", time.Time{}, false, true},
	} {
		got, ok, err := lastSync(strings.NewReader(tt.text))
		if !got.Equal(tt.want) || ok != tt.ok || (err != nil) != tt.err {
			t.Errorf("lastSync(%q) = %v, %v, %v", tt.text, got, ok, err)
		}
	}
}
