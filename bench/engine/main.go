// Command engine compares programming one nftables table through the
// nftguard engine with the text tools it replaces: nft -f,
// iptables-nft-restore (with ipset restore for the set, as kube-router
// does), and kube-router's iptables-nft-save | edit | iptables-nft-restore
// cycle. It shows two views of the same content:
//
//   - rules only: n rules over 100 chains, no set, in every tool;
//   - rules + elements: the same rules plus a set of -elems IPv4 addresses
//     matched first in the input chain (nft: set @allowed and
//     `ip saddr @allowed accept`; iptables: an ipset hash:ip named allowed
//     loaded by `ipset restore`, then `-m set --match-set allowed src`).
//
// Every run gets a fresh network namespace (checked empty: no nft ruleset,
// no ipsets); each number is the median of several runs. It needs root and
// the nft, iptables-nft and ipset binaries (make deps).
//
//	go run ./bench/engine          # bounded profile: 1k and 10k rules
//	go run ./bench/engine -full    # 1k, 10k and 50k rules
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/testns"
)

const (
	nChains  = 100
	table    = "nftguard"
	setName  = "allowed"
	goalRule = 50000 // the rule count the goals are stated at
)

// binaries are the baselines, with the Debian package that provides each.
var binaries = []struct{ name, pkg string }{
	{"nft", "nftables"},
	{"iptables-nft-restore", "iptables"},
	{"iptables-nft-save", "iptables"},
	{"ipset", "ipset"},
	{"nsenter", "util-linux"},
}

func main() {
	full := flag.Bool("full", false, "also measure 50k rules (several minutes)")
	runs := flag.Int("runs", 3, "runs per measurement (the median is printed)")
	elems := flag.Int("elems", 100000, "set elements in the rules+elements view (nft set and ipset)")
	flag.Parse()
	sizes := []int{1000, 10000}
	if *full {
		sizes = append(sizes, goalRule)
	}
	if err := run(os.Stdout, sizes, *runs, *elems); err != nil {
		fmt.Fprintln(os.Stderr, "bench-engine:", err)
		os.Exit(1)
	}
}

// result holds the median times of one ruleset size.
type result struct {
	rules int
	// rules only
	engR, nftR, iptR time.Duration
	// rules + elements; ipt is ipset restore + iptables-nft-restore
	engE, nftE, ipsetE, iptE, iptTotE time.Duration
	// one rule changed (rules + elements variant)
	chEngine, chNftF, chNftAdd, chCy time.Duration
}

// measurement is one timed thing: fn runs in a fresh namespace and returns
// one duration per destination (each destination gets its own median).
type measurement struct {
	dst []*time.Duration
	fn  func(*testns.NS) ([]time.Duration, error)
}

func one(dst *time.Duration, fn func(*testns.NS) (time.Duration, error)) measurement {
	return measurement{[]*time.Duration{dst}, func(ns *testns.NS) ([]time.Duration, error) {
		d, err := fn(ns)
		return []time.Duration{d}, err
	}}
}

func run(w io.Writer, sizes []int, runs, elems int) error {
	if runs < 1 {
		return fmt.Errorf("-runs must be at least 1")
	}
	for _, b := range binaries {
		if err := lookup(b.name); err != nil {
			return err
		}
	}
	before, err := hostState()
	if err != nil {
		return err
	}
	var results []result
	for _, n := range sizes {
		fmt.Fprintf(os.Stderr, "measuring %d rules, %d elements, %d runs...\n", n, elems, runs)
		dR := desired(n, 0, false)
		dE := desired(n, elems, true)
		dE2 := changed(dE)
		textR, err := engine.Render(engine.Table{Name: table}, dR)
		if err != nil {
			return err
		}
		textE, err := engine.Render(engine.Table{Name: table}, dE)
		if err != nil {
			return err
		}
		iptR := iptablesRules(n, false)
		iptE := iptablesRules(n, true)
		sets := ipsetRestore(elems)
		r := result{rules: n}
		for _, m := range []measurement{
			one(&r.engR, func(ns *testns.NS) (time.Duration, error) { return engineFull(ns, dR) }),
			one(&r.nftR, func(ns *testns.NS) (time.Duration, error) { return timeExec(ns, textR, "nft", "-f", "-") }),
			one(&r.iptR, func(ns *testns.NS) (time.Duration, error) { return timeExec(ns, iptR, "iptables-nft-restore") }),
			one(&r.engE, func(ns *testns.NS) (time.Duration, error) { return engineFull(ns, dE) }),
			one(&r.nftE, func(ns *testns.NS) (time.Duration, error) { return timeExec(ns, textE, "nft", "-f", "-") }),
			{[]*time.Duration{&r.iptTotE, &r.ipsetE, &r.iptE}, func(ns *testns.NS) ([]time.Duration, error) {
				return ipsetIptables(ns, sets, iptE, elems)
			}},
			one(&r.chEngine, func(ns *testns.NS) (time.Duration, error) { return engineChange(ns, dE, dE2) }),
			one(&r.chNftF, func(ns *testns.NS) (time.Duration, error) { return nftRewrite(ns, textE, dE2) }),
			one(&r.chNftAdd, func(ns *testns.NS) (time.Duration, error) { return nftAddRule(ns, textE) }),
			one(&r.chCy, func(ns *testns.NS) (time.Duration, error) { return cycle(ns, sets, iptE) }),
		} {
			meds, err := medians(runs, m.fn)
			if err != nil {
				return fmt.Errorf("%d rules: %w", n, err)
			}
			for i, dst := range m.dst {
				*dst = meds[i]
			}
		}
		results = append(results, r)
	}
	after, err := hostState()
	if err != nil {
		return err
	}
	if extra := added(before, after); len(extra) > 0 {
		return fmt.Errorf("the host gained %s during the benchmark (it must touch only its namespaces)", strings.Join(extra, ", "))
	}
	report(w, results, runs, elems)
	return nil
}

// medians runs fn in a fresh namespace runs times and returns the median of
// each duration it reports.
func medians(runs int, fn func(*testns.NS) ([]time.Duration, error)) ([]time.Duration, error) {
	var all [][]time.Duration
	for i := 0; i < runs; i++ {
		ns, err := testns.Create("bench")
		if err != nil {
			return nil, err
		}
		ds, err := fresh(ns)
		if err == nil {
			ds, err = fn(ns)
		}
		if derr := ns.Delete(); err == nil && derr != nil {
			err = fmt.Errorf("delete namespace %s: %w", ns.Name, derr)
		}
		if err != nil {
			return nil, err
		}
		all = append(all, ds)
	}
	meds := make([]time.Duration, len(all[0]))
	for k := range meds {
		col := make([]time.Duration, len(all))
		for i := range all {
			col[i] = all[i][k]
		}
		slices.Sort(col)
		meds[k] = col[len(col)/2]
	}
	return meds, nil
}

// fresh checks that a new namespace holds no nft ruleset and no ipsets.
func fresh(ns *testns.NS) ([]time.Duration, error) {
	if out, err := execIn(ns, "", "ipset", "list", "-n"); err != nil {
		return nil, err
	} else if strings.TrimSpace(out) != "" {
		return nil, fmt.Errorf("namespace %s is not fresh: it already has ipsets %q", ns.Name, out)
	}
	if out, err := execIn(ns, "", "nft", "list", "ruleset"); err != nil {
		return nil, err
	} else if strings.TrimSpace(out) != "" {
		return nil, fmt.Errorf("namespace %s is not fresh: it already has an nft ruleset:\n%s", ns.Name, out)
	}
	return nil, nil
}

// hostState lists the host's ipsets and nft tables, one per line.
func hostState() ([]string, error) {
	sets, err := testns.Exec0("ipset", "list", "-n")
	if err != nil {
		return nil, fmt.Errorf("read the host's ipsets: %w", err)
	}
	tables, err := testns.Exec0("nft", "list", "tables")
	if err != nil {
		return nil, fmt.Errorf("read the host's nft tables: %w", err)
	}
	var out []string
	for _, l := range strings.Split(sets, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, "ipset "+l)
		}
	}
	for _, l := range strings.Split(tables, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, "nft "+l)
		}
	}
	return out, nil
}

func added(before, after []string) []string {
	var out []string
	for _, a := range after {
		if !slices.Contains(before, a) {
			out = append(out, a)
		}
	}
	return out
}

// desired is the benchmark ruleset: a base chain jumping to 100 chains
// that hold n rules in all; withSet adds a set of elems IPv4 addresses
// matched by the base chain's first rule.
func desired(n, elems int, withSet bool) *engine.Desired {
	base := engine.Chain{Name: "input", Type: "filter", Hook: "input"}
	if withSet {
		base.Rules = append(base.Rules, engine.Rule{Rule: "ip saddr @" + setName + " accept"})
	}
	chains := make([]engine.Chain, nChains)
	for c := range chains {
		chains[c].Name = fmt.Sprintf("c%03d", c)
		base.Rules = append(base.Rules, engine.Rule{Rule: "jump " + chains[c].Name})
	}
	for i := 0; i < n; i++ {
		c := &chains[i%nChains]
		c.Rules = append(c.Rules, engine.Rule{Rule: fmt.Sprintf("ip daddr %s tcp dport %d accept", addr(i), 1000+i%60000)})
	}
	d := &engine.Desired{Chains: append([]engine.Chain{base}, chains...)}
	if withSet {
		s := engine.Set{Name: setName, Type: "ipv4_addr", Elements: make([]engine.Element, elems)}
		for i := range s.Elements {
			s.Elements[i].Key = elemAddr(i)
		}
		d.Sets = []engine.Set{s}
	}
	return d
}

func addr(i int) string {
	return fmt.Sprintf("10.%d.%d.%d", byte(i>>16), byte(i>>8), byte(i))
}

// elemAddr is the i-th set element (the same in the nft set and the ipset).
func elemAddr(i int) string {
	return fmt.Sprintf("172.%d.%d.%d", byte(i>>16), byte(i>>8), byte(i))
}

// changed returns d with one rule of chain c050 replaced (sharing every
// other slice, as a caller that rebuilds only what changed would).
func changed(d *engine.Desired) *engine.Desired {
	c := *d
	c.Chains = slices.Clone(d.Chains)
	for i := range c.Chains {
		if c.Chains[i].Name == "c050" {
			c.Chains[i].Rules = slices.Clone(c.Chains[i].Rules)
			c.Chains[i].Rules[1] = engine.Rule{Rule: "ip daddr 192.0.2.1 tcp dport 1 drop"}
		}
	}
	return &c
}

// iptablesRules is the same rule structure for iptables-nft-restore: 100
// chains jumped to from INPUT, n rules in all; withSet puts the ipset match
// first in INPUT, as the nft base chain has its set match first.
func iptablesRules(n int, withSet bool) string {
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for c := 0; c < nChains; c++ {
		fmt.Fprintf(&b, ":c%03d - [0:0]\n", c)
	}
	if withSet {
		fmt.Fprintf(&b, "-A INPUT -m set --match-set %s src -j ACCEPT\n", setName)
	}
	for c := 0; c < nChains; c++ {
		fmt.Fprintf(&b, "-A INPUT -j c%03d\n", c)
	}
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "-A c%03d -d %s/32 -p tcp -m tcp --dport %d -j ACCEPT\n", i%nChains, addr(i), 1000+i%60000)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// ipsetRestore is the `ipset restore` input for the set: a hash:ip with the
// same addresses as the nft set (maxelem raised to fit them).
func ipsetRestore(elems int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "create %s hash:ip family inet hashsize 1024 maxelem %d\n", setName, max(65536, elems))
	for i := 0; i < elems; i++ {
		fmt.Fprintf(&b, "add %s %s\n", setName, elemAddr(i))
	}
	return b.String()
}

func engineFull(ns *testns.NS, d *engine.Desired) (time.Duration, error) {
	e, err := engine.New(engine.Table{Name: table}, engine.WithNetNS(ns.Path))
	if err != nil {
		return 0, err
	}
	defer e.Close()
	start := time.Now()
	if _, err := e.Sync(context.Background(), d); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// ipsetIptables programs the rules+elements view as kube-router does:
// ipset restore, then iptables-nft-restore. It returns the total and the
// two parts, and checks that the set got every element.
func ipsetIptables(ns *testns.NS, sets, rules string, elems int) ([]time.Duration, error) {
	dSet, err := timeExec(ns, sets, "ipset", "restore")
	if err != nil {
		return nil, err
	}
	dIpt, err := timeExec(ns, rules, "iptables-nft-restore")
	if err != nil {
		return nil, err
	}
	out, err := execIn(ns, "", "ipset", "list", setName, "-t")
	if err != nil {
		return nil, err
	}
	if want := fmt.Sprintf("Number of entries: %d\n", elems); !strings.Contains(out, want) {
		return nil, fmt.Errorf("ipset %s after restore lacks %q:\n%s", setName, strings.TrimSpace(want), out)
	}
	return []time.Duration{dSet + dIpt, dSet, dIpt}, nil
}

// engineChange programs d, then times the Sync that changes it to d2.
func engineChange(ns *testns.NS, d, d2 *engine.Desired) (time.Duration, error) {
	e, err := engine.New(engine.Table{Name: table}, engine.WithNetNS(ns.Path))
	if err != nil {
		return 0, err
	}
	defer e.Close()
	ctx := context.Background()
	if _, err := e.Sync(ctx, d); err != nil {
		return 0, err
	}
	start := time.Now()
	st, err := e.Sync(ctx, d2)
	if err != nil {
		return 0, err
	}
	if st.Read || st.Messages > 2 {
		return 0, fmt.Errorf("engine one-rule change was not incremental: %+v", st)
	}
	return time.Since(start), nil
}

// nftRewrite loads the table, then times reloading all of it with one rule
// changed (flush table + full text, as knftables does).
func nftRewrite(ns *testns.NS, text string, d2 *engine.Desired) (time.Duration, error) {
	if _, err := execIn(ns, text, "nft", "-f", "-"); err != nil {
		return 0, err
	}
	t2, err := engine.Render(engine.Table{Name: table}, d2)
	if err != nil {
		return 0, err
	}
	return timeExec(ns, "flush table inet "+table+"\n"+t2, "nft", "-f", "-")
}

// nftAddRule loads the table, then times one `nft add rule` command.
func nftAddRule(ns *testns.NS, text string) (time.Duration, error) {
	if _, err := execIn(ns, text, "nft", "-f", "-"); err != nil {
		return 0, err
	}
	return timeExec(ns, "", "nft", "add", "rule", "inet", table, "c050", "ip", "daddr", "192.0.2.1", "tcp", "dport", "1", "drop")
}

// cycle loads the ipset and the iptables rules, then times kube-router's
// way of changing one rule: save all iptables rules, edit the text, restore
// them all. The ipset is not part of the cycle (kube-router saves and
// restores only iptables here).
func cycle(ns *testns.NS, sets, rules string) (time.Duration, error) {
	if _, err := execIn(ns, sets, "ipset", "restore"); err != nil {
		return 0, err
	}
	if _, err := execIn(ns, rules, "iptables-nft-restore"); err != nil {
		return 0, err
	}
	start := time.Now()
	saved, err := execIn(ns, "", "iptables-nft-save")
	if err != nil {
		return 0, err
	}
	old := fmt.Sprintf("-A c050 -d %s/32", addr(150))
	i := strings.Index(saved, old)
	if i < 0 {
		return 0, fmt.Errorf("iptables-nft-save output lacks %q", old)
	}
	end := i + strings.IndexByte(saved[i:], '\n')
	edited := saved[:i] + "-A c050 -d 192.0.2.1/32 -p tcp -m tcp --dport 1 -j DROP" + saved[end:]
	if _, err := execIn(ns, edited, "iptables-nft-restore"); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// lookup fails loudly, naming the Debian package, if a baseline binary is
// missing.
func lookup(name string) error {
	if _, err := exec.LookPath(name); err != nil {
		pkg := "?"
		for _, b := range binaries {
			if b.name == name {
				pkg = b.pkg
			}
		}
		return fmt.Errorf("baseline binary %s not found (make deps; Debian package %s): %w", name, pkg, err)
	}
	return nil
}

// execIn runs a baseline binary in the namespace.
func execIn(ns *testns.NS, stdin, name string, args ...string) (string, error) {
	if err := lookup(name); err != nil {
		return "", err
	}
	return ns.Exec(stdin, name, args...)
}

func timeExec(ns *testns.NS, stdin, name string, args ...string) (time.Duration, error) {
	if err := lookup(name); err != nil {
		return 0, err
	}
	start := time.Now()
	if _, err := ns.Exec(stdin, name, args...); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func report(w io.Writer, rs []result, runs, elems int) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	ratio := func(a, b time.Duration) string { return fmt.Sprintf("%.3f", float64(a)/float64(b)) }
	fmt.Fprintf(w, "Medians of %d runs, fresh namespace per run (checked: no nft ruleset, no ipsets); n rules over %d chains.\n", runs, nChains)

	fmt.Fprintf(w, "\nFull program, rules only (no set anywhere):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rules\tengine\tnft -f\tiptables-nft-restore\tengine/nft -f\tengine/ipt\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t\n", r.rules, ms(r.engR), ms(r.nftR), ms(r.iptR), ratio(r.engR, r.nftR), ratio(r.engR, r.iptR))
	}
	tw.Flush()

	fmt.Fprintf(w, "\nFull program, rules + %d set elements (nft: set @%s, `ip saddr @%s accept` first in input;\n", elems, setName, setName)
	fmt.Fprintf(w, "iptables as kube-router: ipset restore of hash:ip %s, then iptables-nft-restore with\n", setName)
	fmt.Fprintf(w, "`-A INPUT -m set --match-set %s src -j ACCEPT` first; ipset+ipt is the median of per-run sums):\n", setName)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rules\tengine\tnft -f\tipset restore\tiptables-nft-restore\tipset+ipt\tengine/nft -f\tengine/(ipset+ipt)\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.rules, ms(r.engE), ms(r.nftE), ms(r.ipsetE), ms(r.iptE), ms(r.iptTotE),
			ratio(r.engE, r.nftE), ratio(r.engE, r.iptTotE))
	}
	tw.Flush()

	fmt.Fprintf(w, "\nOne rule changed (rules + elements; save|edit|restore is iptables-nft-save | edit | iptables-nft-restore\n")
	fmt.Fprintf(w, "of the iptables rules only, as kube-router does: the ipset is loaded beforehand and not part of the cycle):\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rules\tengine\tnft -f (flush+reload)\tnft add rule\tsave|edit|restore\tengine/nft -f\tengine/nft add\tengine/cycle\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.rules, ms(r.chEngine), ms(r.chNftF), ms(r.chNftAdd), ms(r.chCy),
			ratio(r.chEngine, r.chNftF), ratio(r.chEngine, r.chNftAdd), ratio(r.chEngine, r.chCy))
	}
	tw.Flush()

	// The goals are stated at 50k rules; without -full, judge the largest
	// size measured and say so.
	g := rs[len(rs)-1]
	size := fmt.Sprintf("%dk", g.rules/1000)
	fmt.Fprintf(w, "\nGoals:\n")
	if g.rules != goalRule {
		fmt.Fprintf(w, "(the goals are at %dk rules, measured only with -full; judged here at %s rules as an indication)\n", goalRule/1000, size)
	}
	verdict := func(r, limit float64) string {
		if r <= limit {
			return fmt.Sprintf("%.2f× met", r)
		}
		return fmt.Sprintf("%.2f× not met", r)
	}
	fr := func(a, b time.Duration) float64 { return float64(a) / float64(b) }
	fmt.Fprintf(w, "full %s program ≤ 0.5× nft -f: rules only %s; rules+elements %s\n", size,
		verdict(fr(g.engR, g.nftR), 0.5), verdict(fr(g.engE, g.nftE), 0.5))
	fmt.Fprintf(w, "full %s program ≤ 0.8× iptables-nft-restore: rules only %s; rules+elements (vs ipset restore + iptables-nft-restore) %s\n", size,
		verdict(fr(g.engR, g.iptR), 0.8), verdict(fr(g.engE, g.iptTotE), 0.8))
	speedup := fr(g.chCy, g.chEngine)
	met := "not met"
	if speedup >= 100 {
		met = "met"
	}
	fmt.Fprintf(w, "one change at %s ≥ 100× faster than save|edit|restore: %.4f× (%.0f× faster) %s\n", size, fr(g.chEngine, g.chCy), speedup, met)
}
