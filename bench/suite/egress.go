package main

import (
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/internal/egresslat"
	"github.com/nftguard/nftguard/internal/testns"
)

// Scenario 8: egress SNAT through `nftguard run`. The measurement is e2e's
// TestAgentEgressLatency, run as a subprocess (the API server harness runs
// only under testing, and the lab, the agents and the measuring code live
// there once), which writes its samples as internal/egresslat JSON:
//
//   - a selected pod's address written to the API → its SNAT map entry;
//   - the Service's address removed from / added to the node's lo (kube-vip
//     failover) → the pod's address held / translated again;
//   - TCP connection setup of a known pod with the pod-start guard off / on.
//
// The baseline is what kube-vip does for the first: an iptables SNAT rule
// per pod, written by running the iptables binary, timed here in a fresh
// namespace that holds the same-size cluster's iptables ruleset (section
// 2's equivalent) and the node's other pods' SNAT rules.

// egressSpec is the scenario's size.
type egressSpec struct {
	Size size // the load written before measuring (zero: the lab alone)
	Runs int  // measurements of each kind; 0 skips the scenario
}

// The baseline's chain and the address it translates to.
const (
	iptEgressChain = "EGRESS-SNAT"
	iptEgressVIP   = "203.0.113.7"
)

// egressResult is scenario 8.
type egressResult struct {
	Spec     egressSpec
	Command  string
	Duration time.Duration
	Measured *egresslat.Result
	// The baseline: one `iptables-nft -t nat -A` / `-D` of a pod's SNAT
	// rule each, in seconds, with IPTFilterRules rules in the filter
	// table and IPTSNATRules SNAT rules of other pods in its chain.
	IPTInsert, IPTDelete         sample
	IPTFilterRules, IPTSNATRules int
	LoadAvg                      []string // at start, after the agent part, at the end
}

// runEgress runs TestAgentEgressLatency, then the iptables baseline.
func (r *runner) runEgress() (egressResult, error) {
	spec := r.prof.Egress
	res := egressResult{Spec: spec, LoadAvg: []string{loadAvg()}}
	path := filepath.Join(r.work, "egress.json")
	// -count 1: a cached pass would carry no fresh JSON.
	args := []string{"test", "-count", "1", "-timeout", "40m", "-run", "^TestAgentEgressLatency$", "./e2e",
		"-args", fmt.Sprintf("-egress.runs=%d", spec.Runs), "-egress.out=" + path}
	if spec.Size.Pods > 0 {
		args = append(args, "-egress.scale", fmt.Sprintf("-egress.pods=%d", spec.Size.Pods), fmt.Sprintf("-egress.policies=%d", spec.Size.Policies))
	}
	// The report names the result file by its role, not its temporary path.
	res.Command = strings.Replace("go "+strings.Join(args, " "), path, "FILE", 1)
	r.logf("egress: %s", res.Command)
	res.Measured = &egresslat.Result{}
	var err error
	if res.Duration, err = r.testJSON(r.root, args[1:], nil, path, "egress", res.Measured); err != nil {
		res.Measured = nil
		return res, err
	}
	m := res.Measured
	if len(m.AddressToSNAT) == 0 || len(m.LostToHeld) == 0 || len(m.ConnectGuardOn) == 0 {
		return res, fmt.Errorf("egress result lacks samples: %d pod addresses, %d failovers, %d connects", len(m.AddressToSNAT), len(m.LostToHeld), len(m.ConnectGuardOn))
	}
	res.LoadAvg = append(res.LoadAvg, loadAvg())
	r.logf("egress: pod address -> SNAT p50 %.1f ms, p99 %.1f ms", egresslat.Quantile(m.AddressToSNAT, 0.5), egresslat.Quantile(m.AddressToSNAT, 0.99))
	if err := r.inNS(func(ns *testns.NS) error { return r.iptablesEgress(ns, &res) }); err != nil {
		return res, fmt.Errorf("iptables baseline: %w", err)
	}
	res.LoadAvg = append(res.LoadAvg, loadAvg())
	r.logf("egress: iptables-nft -A SNAT p50 %s", msf(res.IPTInsert.median()))
	return res, nil
}

// iptablesEgress loads the same-size cluster's iptables ruleset and the
// node's pods' SNAT rules into ns, then times Runs rule inserts and
// deletes, one new pod each. Each is one run of the iptables binary from a
// thread inside ns (as a controller using go-iptables runs it in its own
// namespace), without nsenter; kube-vip's library checks a rule with -C
// before appending it, a second run not counted here.
func (r *runner) iptablesEgress(ns *testns.NS, res *egressResult) error {
	spec := res.Spec
	if spec.Size.Pods > 0 {
		b := compose.Build(newCluster(spec.Size).input())
		if len(b.Problems) > 0 {
			return fmt.Errorf("invalid objects: %v", b.Problems[0])
		}
		text, _, rules := iptablesEquivalent(b.Desired)
		if _, err := ns.Exec(text, "iptables-nft-restore"); err != nil {
			return err
		}
		res.IPTFilterRules = rules
	}
	// The node's share of the cluster's pods, each with its rule.
	res.IPTSNATRules = max(spec.Size.Pods/clusterNodes, 1)
	var nat strings.Builder
	fmt.Fprintf(&nat, "*nat\n:POSTROUTING ACCEPT [0:0]\n:%s - [0:0]\n-A POSTROUTING -j %s\n", iptEgressChain, iptEgressChain)
	for i := range res.IPTSNATRules {
		fmt.Fprintf(&nat, "-A %s %s\n", iptEgressChain, strings.Join(iptSNATRule(i), " "))
	}
	nat.WriteString("COMMIT\n")
	if _, err := ns.Exec(nat.String(), "iptables-nft-restore", "--noflush"); err != nil {
		return err
	}
	run := func(args ...string) (time.Duration, error) {
		var d time.Duration
		err := ns.Run(func() error {
			cmd := exec.CommandContext(r.ctx, "iptables-nft", args...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			start := time.Now()
			err := cmd.Run()
			d = time.Since(start)
			if err != nil {
				return fmt.Errorf("iptables-nft %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
			}
			return nil
		})
		return d, err
	}
	for i := range spec.Runs {
		rule := iptSNATRule(res.IPTSNATRules + i)
		d, err := run(append([]string{"-t", "nat", "-A", iptEgressChain}, rule...)...)
		if err != nil {
			return err
		}
		res.IPTInsert = append(res.IPTInsert, d.Seconds())
		if d, err = run(append([]string{"-t", "nat", "-D", iptEgressChain}, rule...)...); err != nil {
			return err
		}
		res.IPTDelete = append(res.IPTDelete, d.Seconds())
	}
	// The rules were written where the timing says: the chain holds the
	// node's pods' rules again, and nothing else.
	listed, err := ns.Exec("", "iptables-nft", "-t", "nat", "-S", iptEgressChain)
	if err != nil {
		return err
	}
	if n := strings.Count(listed, "-j SNAT"); n != res.IPTSNATRules {
		return fmt.Errorf("chain %s holds %d SNAT rules after the runs, want %d", iptEgressChain, n, res.IPTSNATRules)
	}
	return nil
}

// iptSNATRule is pod i's rule: its address translated to the Service's,
// with a comment naming it, as kube-vip writes one per pod.
func iptSNATRule(i int) []string {
	return []string{"-s", fmt.Sprintf("10.255.%d.%d/32", i/256%256, i%256), "-m", "comment", "--comment", fmt.Sprintf("egress:x/pod-%d", i),
		"-j", "SNAT", "--to-source", iptEgressVIP}
}

// millis is a sample of seconds in milliseconds, as egresslat keeps times.
func (s sample) millis() []float64 {
	out := make([]float64, len(s))
	for i, v := range s {
		out[i] = v * 1000
	}
	return out
}

// p50p99 and p50p99f format the median and p99 of milliseconds; the
// second with µs, for the connect times.
func p50p99(ms []float64) string {
	return fmt.Sprintf("%.1f / %.1f ms", egresslat.Quantile(ms, 0.5), egresslat.Quantile(ms, 0.99))
}

func (e egressResult) sizeName() string {
	if e.Spec.Size.Pods == 0 {
		return "the lab's pods only"
	}
	return e.Spec.Size.String()
}

// summaryRows adds scenario 8 to the summary table.
func (e egressResult) summaryRows(w io.Writer) {
	m := e.Measured
	if m == nil {
		return
	}
	if ins := e.IPTInsert.millis(); len(ins) > 0 {
		fmt.Fprintf(w, "| egress: pod address → SNAT, %s | API write → kernel p50 / p99 %s | one `iptables-nft -A` SNAT rule %s | nftguard/iptables: p50 %.2f×, p99 %.2f× |\n",
			e.sizeName(), p50p99(m.AddressToSNAT), p50p99(ins),
			egresslat.Quantile(m.AddressToSNAT, 0.5)/egresslat.Quantile(ins, 0.5), egresslat.Quantile(m.AddressToSNAT, 0.99)/egresslat.Quantile(ins, 0.99))
	} else {
		fmt.Fprintf(w, "| egress: pod address → SNAT, %s | API write → kernel p50 / p99 %s | not measured | — |\n", e.sizeName(), p50p99(m.AddressToSNAT))
	}
	fmt.Fprintf(w, "| egress: failover, address lost → held / gained → SNAT | %s / %s | — | — |\n", p50p99(m.LostToHeld), p50p99(m.GainedToSNAT))
	fmt.Fprintf(w, "| egress: pod-start guard on, known pod's TCP connect | %s | guard off %s | on/off: p50 %.2f×, p99 %.2f× |\n",
		p50p99f(m.ConnectGuardOn), p50p99f(m.ConnectGuardOff),
		egresslat.Quantile(m.ConnectGuardOn, 0.5)/egresslat.Quantile(m.ConnectGuardOff, 0.5),
		egresslat.Quantile(m.ConnectGuardOn, 0.99)/egresslat.Quantile(m.ConnectGuardOff, 0.99))
}

func p50p99f(ms []float64) string {
	return fmt.Sprintf("%.3f / %.3f ms", egresslat.Quantile(ms, 0.5), egresslat.Quantile(ms, 0.99))
}

// section writes scenario 8.
func (e egressResult) section(w io.Writer, plots map[string]string) {
	fmt.Fprintln(w, "## 8. Egress SNAT through `nftguard run`")
	fmt.Fprintln(w)
	if e.Spec.Runs == 0 {
		fmt.Fprintln(w, "Not part of this profile.")
		fmt.Fprintln(w)
		return
	}
	m := e.Measured
	if m == nil {
		fmt.Fprintln(w, "Not measured: the run failed (see Failures).")
		fmt.Fprintln(w)
		return
	}
	load := "none: the lab's pods only"
	if m.Pods > 0 {
		load = fmt.Sprintf("%d pods over %d nodes (%d on the measured node, their addresses outside the egress pod ranges, so they load the informers and the compile, not the egress sets) and %d NetworkPolicies", m.Pods, m.Nodes, m.Pods/m.Nodes, m.Policies)
	}
	fmt.Fprintf(w, "`%s` (%s; load average %s): two lab nodes, each with `nftguard run` (`--min-sync-interval 20ms --max-sync-interval 500ms`) against a real kube-apiserver + etcd; times are taken on n1's kernel table, read over netlink every 0.2–0.5 ms. Load written first: %s. %d measurements of each kind.\n\n",
		e.Command, e.Duration.Round(time.Second), strings.Join(e.LoadAvg, " → "), load, m.Runs)
	fmt.Fprintln(w, "- **pod address → SNAT**: a new selected pod on n1, created without an address (the pod-start guard on, as at a real start); from the status write with its address to its `eg_snat4` entry.")
	fmt.Fprintln(w, "- **address lost → held / gained → SNAT**: the Service's address removed from and added to n1's `lo` over netlink in n1's namespace (kube-vip's failover); from the netlink call to the selected pod's address in `eg_hold4`, and back in `eg_snat4`.")
	fmt.Fprintln(w, "- **guard cost**: TCP connection setup (SYN to SYN-ACK) from a pod whose address is known, not selected, to the external host, 4 alternating rounds with the guard off and on (on: a selected pod without an address exists).")
	fmt.Fprintf(w, "- **baseline**: kube-vip's way, one iptables SNAT rule per pod written by running the iptables binary: `iptables-nft -t nat -A %s -s POD/32 -m comment --comment … -j SNAT --to-source %s` and its `-D`, each one run of the binary from inside a fresh namespace that holds %d filter rules (section 2's iptables equivalent of a cluster of the same size) and %d other pods' SNAT rules. It times the kernel write alone: a controller's watch of the API comes on top, which the nftguard column includes.\n\n",
		iptEgressChain, iptEgressVIP, e.IPTFilterRules, e.IPTSNATRules)
	fmt.Fprintln(w, "| kind | n | p50 | p99 | max |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	for _, k := range []struct {
		name string
		d    []float64
	}{
		{"pod address → SNAT (API write → kernel)", m.AddressToSNAT},
		{"address lost → held (netlink → kernel)", m.LostToHeld},
		{"address gained → SNAT (netlink → kernel)", m.GainedToSNAT},
		{"baseline: `iptables-nft -A` one pod's SNAT rule", e.IPTInsert.millis()},
		{"baseline: `iptables-nft -D` one pod's SNAT rule", e.IPTDelete.millis()},
	} {
		fmt.Fprintf(w, "| %s | %d | %.1f ms | %.1f ms | %.1f ms |\n", k.name, len(k.d), egresslat.Quantile(k.d, 0.5), egresslat.Quantile(k.d, 0.99), egresslat.Quantile(k.d, 1))
	}
	for _, k := range []struct {
		name string
		d    []float64
	}{{"known pod's TCP connect, guard off", m.ConnectGuardOff}, {"known pod's TCP connect, guard on", m.ConnectGuardOn}} {
		fmt.Fprintf(w, "| %s | %d | %.3f ms | %.3f ms | %.3f ms |\n", k.name, len(k.d), egresslat.Quantile(k.d, 0.5), egresslat.Quantile(k.d, 0.99), egresslat.Quantile(k.d, 1))
	}
	fmt.Fprintln(w)
	if ins := e.IPTInsert.millis(); len(ins) > 0 {
		fmt.Fprintf(w, "Pod address → SNAT through the whole agent (watch, compile, sync) against one iptables rule insert alone: %.2f× at p50, %.2f× at p99. ",
			egresslat.Quantile(m.AddressToSNAT, 0.5)/egresslat.Quantile(ins, 0.5), egresslat.Quantile(m.AddressToSNAT, 0.99)/egresslat.Quantile(ins, 0.99))
	}
	fmt.Fprintf(w, "Guard on / off, the known pod's connect time: %.2f× at p50, %.2f× at p99. The agent's own view of the address changes, `nftguard_event_to_kernel_seconds{kind=\"LocalAddress\"}` (rtnetlink notification → end of sync): %d changes, %.2f ms on average.\n\n",
		egresslat.Quantile(m.ConnectGuardOn, 0.5)/egresslat.Quantile(m.ConnectGuardOff, 0.5), egresslat.Quantile(m.ConnectGuardOn, 0.99)/egresslat.Quantile(m.ConnectGuardOff, 0.99),
		m.LocalAddressChanges, m.LocalAddressAvgMs)
	if name, ok := plots["egress"]; ok {
		fmt.Fprintf(w, "![egress latencies, distribution](%s)\n\n", name)
	}
}

// plotEgress draws the distribution of each latency kind: the share of
// measurements done within x ms.
func plotEgress(dir string, e egressResult) (string, error) {
	m := e.Measured
	p := newPlot("Egress: change → kernel, distribution ("+e.sizeName()+")", "ms (log)", "share of measurements done", true, false)
	for i, k := range []struct {
		name string
		d    []float64
	}{
		{"pod address → SNAT (nftguard run)", m.AddressToSNAT},
		{"address lost → held (nftguard run)", m.LostToHeld},
		{"address gained → SNAT (nftguard run)", m.GainedToSNAT},
		{"iptables-nft -A one SNAT rule", e.IPTInsert.millis()},
	} {
		pts := make(plotter.XYs, 0, len(k.d))
		for j, v := range sortedCopy(k.d) {
			pts = append(pts, plotter.XY{X: max(v, 0.01), Y: float64(j+1) / float64(len(k.d))})
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return "", fmt.Errorf("series %s: %w", k.name, err)
		}
		l.Color = plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i)
		p.Add(l)
		p.Legend.Add(k.name, l)
	}
	return save(p, dir, "egress.png")
}

func sortedCopy(xs []float64) []float64 { return sample(xs).sorted() }
