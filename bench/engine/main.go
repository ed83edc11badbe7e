// Command engine compares programming one nftables table through the
// nftguard engine with the text tools it replaces: nft -f,
// iptables-nft-restore, and kube-router's iptables-nft-save | edit |
// iptables-nft-restore cycle. Every run gets a fresh network namespace;
// each number is the median of several runs. It needs root and the nft and
// iptables-nft binaries (make deps).
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
	nChains = 100
	table   = "nftguard"
)

func main() {
	full := flag.Bool("full", false, "also measure 50k rules (several minutes)")
	runs := flag.Int("runs", 3, "runs per measurement (the median is printed)")
	elems := flag.Int("elems", 100000, "set elements in the nft table")
	flag.Parse()
	sizes := []int{1000, 10000}
	if *full {
		sizes = append(sizes, 50000)
	}
	if err := run(os.Stdout, sizes, *runs, *elems); err != nil {
		fmt.Fprintln(os.Stderr, "bench-engine:", err)
		os.Exit(1)
	}
}

// result holds the median times of one ruleset size.
type result struct {
	rules                            int
	engine, nftF, iptRestore, cycle  time.Duration
	chEngine, chNftF, chNftAdd, chCy time.Duration
}

func run(w io.Writer, sizes []int, runs, elems int) error {
	var results []result
	for _, n := range sizes {
		fmt.Fprintf(os.Stderr, "measuring %d rules, %d elements, %d runs...\n", n, elems, runs)
		d := desired(n, elems)
		d2 := changed(d)
		text, err := engine.Render(engine.Table{Name: table}, d)
		if err != nil {
			return err
		}
		ipt := iptablesRules(n)
		r := result{rules: n}
		for _, m := range []struct {
			dst *time.Duration
			fn  func(*testns.NS) (time.Duration, error)
		}{
			{&r.engine, func(ns *testns.NS) (time.Duration, error) { return engineFull(ns, d) }},
			{&r.nftF, func(ns *testns.NS) (time.Duration, error) { return timeExec(ns, text, "nft", "-f", "-") }},
			{&r.iptRestore, func(ns *testns.NS) (time.Duration, error) { return timeExec(ns, ipt, "iptables-nft-restore") }},
			{&r.cycle, func(ns *testns.NS) (time.Duration, error) { return cycle(ns, ipt) }},
			{&r.chEngine, func(ns *testns.NS) (time.Duration, error) { return engineChange(ns, d, d2) }},
			{&r.chNftF, func(ns *testns.NS) (time.Duration, error) { return nftRewrite(ns, text, d2) }},
			{&r.chNftAdd, func(ns *testns.NS) (time.Duration, error) { return nftAddRule(ns, text) }},
		} {
			med, err := median(runs, m.fn)
			if err != nil {
				return fmt.Errorf("%d rules: %w", n, err)
			}
			*m.dst = med
		}
		r.chCy = r.cycle // the cycle is the change: save, edit one rule, restore
		results = append(results, r)
	}
	report(w, results, runs, elems)
	return nil
}

// median runs fn in a fresh namespace runs times.
func median(runs int, fn func(*testns.NS) (time.Duration, error)) (time.Duration, error) {
	var ds []time.Duration
	for i := 0; i < runs; i++ {
		ns, err := testns.Create("bench")
		if err != nil {
			return 0, err
		}
		d, err := fn(ns)
		if derr := ns.Delete(); err == nil && derr != nil {
			err = fmt.Errorf("delete namespace %s: %w", ns.Name, derr)
		}
		if err != nil {
			return 0, err
		}
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return ds[len(ds)/2], nil
}

// desired is the benchmark ruleset: a base chain jumping to 100 chains
// that hold n rules in all, and one set of elems IPv4 addresses.
func desired(n, elems int) *engine.Desired {
	base := engine.Chain{Name: "input", Type: "filter", Hook: "input", Rules: []engine.Rule{{Rule: "ip saddr @allowed accept"}}}
	chains := make([]engine.Chain, nChains)
	for c := range chains {
		chains[c].Name = fmt.Sprintf("c%03d", c)
		base.Rules = append(base.Rules, engine.Rule{Rule: "jump " + chains[c].Name})
	}
	for i := 0; i < n; i++ {
		c := &chains[i%nChains]
		c.Rules = append(c.Rules, engine.Rule{Rule: fmt.Sprintf("ip daddr %s tcp dport %d accept", addr(i), 1000+i%60000)})
	}
	s := engine.Set{Name: "allowed", Type: "ipv4_addr", Elements: make([]engine.Element, elems)}
	for i := range s.Elements {
		s.Elements[i].Key = fmt.Sprintf("172.%d.%d.%d", byte(i>>16), byte(i>>8), byte(i))
	}
	return &engine.Desired{Chains: append([]engine.Chain{base}, chains...), Sets: []engine.Set{s}}
}

func addr(i int) string {
	return fmt.Sprintf("10.%d.%d.%d", byte(i>>16), byte(i>>8), byte(i))
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
// chains jumped to from INPUT, n rules in all (the set has no equivalent).
func iptablesRules(n int) string {
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for c := 0; c < nChains; c++ {
		fmt.Fprintf(&b, ":c%03d - [0:0]\n", c)
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
	if _, err := ns.Exec(text, "nft", "-f", "-"); err != nil {
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
	if _, err := ns.Exec(text, "nft", "-f", "-"); err != nil {
		return 0, err
	}
	return timeExec(ns, "", "nft", "add", "rule", "inet", table, "c050", "ip", "daddr", "192.0.2.1", "tcp", "dport", "1", "drop")
}

// cycle loads the iptables rules, then times kube-router's way of changing
// one rule: save everything, edit the text, restore everything.
func cycle(ns *testns.NS, rules string) (time.Duration, error) {
	if _, err := ns.Exec(rules, "iptables-nft-restore"); err != nil {
		return 0, err
	}
	start := time.Now()
	saved, err := ns.Exec("", "iptables-nft-save")
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
	if _, err := ns.Exec(edited, "iptables-nft-restore"); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

func timeExec(ns *testns.NS, stdin, name string, args ...string) (time.Duration, error) {
	if _, err := exec.LookPath(name); err != nil {
		return 0, fmt.Errorf("%s not found (make deps): %w", name, err)
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
	fmt.Fprintf(w, "Medians of %d runs, fresh namespace per run; nft tables have %d set elements, iptables has none.\n\n", runs, elems)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rules\tengine\tnft -f\tiptables-nft-restore\tengine/nft\tengine/ipt\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t\n", r.rules, ms(r.engine), ms(r.nftF), ms(r.iptRestore), ratio(r.engine, r.nftF), ratio(r.engine, r.iptRestore))
	}
	tw.Flush()
	fmt.Fprintln(w, "\nOne rule changed:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rules\tengine\tnft -f (flush+reload)\tnft add rule\tsave|edit|restore\tengine/nft -f\tengine/nft add\tengine/cycle\t")
	for _, r := range rs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.rules, ms(r.chEngine), ms(r.chNftF), ms(r.chNftAdd), ms(r.chCy),
			ratio(r.chEngine, r.chNftF), ratio(r.chEngine, r.chNftAdd), ratio(r.chEngine, r.chCy))
	}
	tw.Flush()
}
