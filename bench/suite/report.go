package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// results is everything one run measured.
type results struct {
	Profile    profile
	Machine    machine
	Duration   time.Duration
	Scale      []scaleResult
	Change     []changeResult
	DataPath   []dpResult
	Memory     memoryResult
	EnvCompile envCompileResult // the envelope profile's compiler side
	DeniedLog  deniedResult
	CNP        cnpResult
	Egress     egressResult
	Domains    domainsResult
	Micro      microResult
	Plots      map[string]string // scenario → PNG file name
	Failures   []string          // scenarios that failed, with why
}

// summary writes the short table `make bench` prints and REPORT.md opens
// with, and the goal lines.
func (res *results) summary(w io.Writer) {
	fmt.Fprintln(w, "| scenario | nftguard | baseline | ratio |")
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	for _, s := range res.Scale {
		fmt.Fprintf(w, "| full program, %v | apply %s | nft -f %s | apply/nft = %.2f |\n",
			s.Size, msf(s.Apply.median()), msf(s.NftF.median()), s.RatioApplyOverNftF)
	}
	for _, c := range res.Change {
		if c.Size != res.changeGoalSize() {
			continue
		}
		fmt.Fprintf(w, "| %s, %v | engine %s = compile %s + Sync %s (%d msgs) | nft -f %s / save\\|edit\\|restore %s | engine %s / %s faster; Sync alone %s / %s |\n",
			c.Change, c.Size, msf(c.Engine.median()), msf(c.Engine.median()-c.Sync.median()), msf(c.Sync.median()), c.Messages,
			msf(c.NftF.median()), msf(c.Cycle.median()),
			times(ratio(c.NftF, c.Engine)), times(ratio(c.Cycle, c.Engine)), times(ratio(c.NftF, c.Sync)), times(ratio(c.Cycle, c.Sync)))
	}
	if none, ok := res.dataPath(dpNone); ok {
		for _, d := range res.DataPath[1:] {
			fmt.Fprintf(w, "| data path, %v | %.0f TCP conn/s, %.0f UDP req/s | no firewall: %.0f, %.0f | %.2f×, %.2f× |\n",
				d.Config, d.TCPConn.median(), d.UDPRR.median(), none.TCPConn.median(), none.UDPRR.median(),
				pairedRatio(d.TCPConn, none.TCPConn), pairedRatio(d.UDPRR, none.UDPRR))
		}
	}
	if d := res.DeniedLog; len(d.On.TCPConn) > 0 {
		tcp, udp := d.ratios()
		fmt.Fprintf(w, "| denied-traffic log on, %s policies | %.0f TCP conn/s, %.0f UDP req/s | logging off: %.0f, %.0f | %.2f×, %.2f× |\n",
			human(d.Policies), d.On.TCPConn.median(), d.On.UDPRR.median(), d.Off.TCPConn.median(), d.Off.UDPRR.median(), tcp, udp)
	}
	res.CNP.summaryRows(w)
	res.Egress.summaryRows(w)
	res.Domains.summaryRows(w)
	fmt.Fprintln(w)
	for _, g := range res.goals() {
		fmt.Fprintln(w, "- "+g)
	}
}

// changeGoalSize is the cluster the change goals are judged in: 10k pods
// when measured, else the largest measured.
func (res *results) changeGoalSize() size {
	var best size
	for _, c := range res.Change {
		if c.Size == s10k {
			return s10k
		}
		if c.Size.Pods > best.Pods {
			best = c.Size
		}
	}
	return best
}

func (res *results) dataPath(policies int) (dpResult, bool) {
	for _, d := range res.DataPath {
		if d.Config.Policies == policies && !d.Config.Guards {
			return d, true
		}
	}
	return dpResult{}, false
}

// times formats a speed-up; below 10 a decimal tells 0.4× from 1×.
func times(r float64) string {
	if r < 10 {
		return fmt.Sprintf("%.1f×", r)
	}
	return fmt.Sprintf("%.0f×", r)
}

func verdict(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**not met**"
}

// goals judges each goal of the issue on what was measured, and says so
// when it was not measured.
func (res *results) goals() []string {
	var out []string
	sz := res.changeGoalSize()
	var worstCycle, worstNft, syncCycle, syncNft float64 = -1, -1, -1, -1
	lower := func(v *float64, r float64) {
		if *v < 0 || r < *v {
			*v = r
		}
	}
	for _, c := range res.Change {
		if c.Size != sz {
			continue
		}
		lower(&worstCycle, ratio(c.Cycle, c.Engine))
		lower(&worstNft, ratio(c.NftF, c.Engine))
		lower(&syncCycle, ratio(c.Cycle, c.Sync))
		lower(&syncNft, ratio(c.NftF, c.Sync))
	}
	if worstCycle < 0 {
		out = append(out, "Change ≥ 200× faster than save|edit|restore: not measured in this run.",
			"Change ≥ 10× faster than nft -f: not measured in this run.")
	} else {
		note := ""
		if sz != s10k {
			note = fmt.Sprintf(" (judged at %v: the 10k cluster is not in this profile)", sz)
		} else {
			note = fmt.Sprintf(" (at %v)", sz)
		}
		out = append(out,
			fmt.Sprintf("Change ≥ 200× faster than iptables-nft save|edit|restore%s: engine (compile + Sync) %s — %s for the worst change; engine.Sync alone (the same step the baseline times: compiled state to kernel) %s — %s.",
				note, verdict(worstCycle >= 200), times(worstCycle), verdict(syncCycle >= 200), times(syncCycle)),
			fmt.Sprintf("Change ≥ 10× faster than nft -f rewrite%s: engine (compile + Sync) %s — %s for the worst change; engine.Sync alone %s — %s.",
				note, verdict(worstNft >= 10), times(worstNft), verdict(syncNft >= 10), times(syncNft)))
	}
	none, okNone := res.dataPath(dpNone)
	k1, ok1 := res.dataPath(1000)
	if okNone && ok1 {
		t, u := pairedRatio(k1.TCPConn, none.TCPConn), pairedRatio(k1.UDPRR, none.UDPRR)
		ct, _ := res.dataPath(dpConntrack)
		out = append(out, fmt.Sprintf("Data path with 1k policies ≥ 0.9× no firewall: %s — TCP connections %.2f×, UDP request/response %.2f× (against conntrack only: %.2f×, %.2f×).",
			verdict(t >= 0.9 && u >= 0.9), t, u, pairedRatio(k1.TCPConn, ct.TCPConn), pairedRatio(k1.UDPRR, ct.UDPRR)))
	} else {
		out = append(out, "Data path with 1k policies ≥ 0.9× no firewall: not measured in this run (profile has no 1k-policy point).")
	}
	out = append(out, res.Memory.goal())
	out = append(out, res.DeniedLog.goal())
	out = append(out, res.CNP.goal())
	return out
}

// markdown writes REPORT.md.
func (res *results) markdown(w io.Writer) {
	res.header(w, "nftguard benchmarks", res.Profile.Reps)
	if len(res.Failures) > 0 {
		fmt.Fprintln(w, "**Failures in this run:**")
		for _, f := range res.Failures {
			fmt.Fprintf(w, "- %s\n", f)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "## Summary")
	fmt.Fprintln(w)
	res.summary(w)
	fmt.Fprintln(w)
	res.scaleSection(w)
	res.changeSection(w)
	res.dataPathSection(w)
	res.EnvCompile.section(w, res.Plots)
	res.Memory.section(w)
	res.microSection(w)
	res.DeniedLog.section(w, res.Profile)
	res.CNP.section(w, res.Profile)
	res.Egress.section(w, res.Plots)
	res.Domains.section(w, res.Plots)
}

// header writes a report's title and the run's conditions.
func (res *results) header(w io.Writer, title string, reps int) {
	m := res.Machine
	fmt.Fprintf(w, "# %s\n\n", title)
	fmt.Fprintf(w, "Generated by `bench/suite` (profile **%s**, %d repetitions, %s) on %s.\n\n",
		res.Profile.Name, reps, res.Duration.Round(time.Second), m.Date.Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(w, "Machine: %d CPUs (%s), %s memory, %s, %s, %s, %s.  \n", m.CPUs, m.CPUModel, m.Memory, m.Kernel, m.Nft, m.IPTables, m.Go)
	fmt.Fprintf(w, "Measured tree: %s.  \n", m.Commit)
	fmt.Fprintf(w, "Load average at start: %s; at the end: %s. Other jobs share this machine; baselines run in the same repetitions as nftguard so ratios hold.\n\n", m.LoadAvgAtStart, m.LoadAvgAtFinish)
	fmt.Fprintf(w, "Every number is the median of the repetitions, with min–max in parentheses; every repetition runs in fresh network namespaces.\n\n")
}

func (res *results) image(w io.Writer, key, alt string) {
	if name, ok := res.Plots[key]; ok {
		fmt.Fprintf(w, "![%s](%s)\n\n", alt, name)
	}
}

func (res *results) scaleSection(w io.Writer) {
	fmt.Fprintln(w, "## 1. Policy scale: full program")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "A synthetic 100-node cluster seen from node %s (so ~1%% of pods are local): pods/10 NetworkPolicies over pods/100 namespaces, 10 per namespace — a default-deny (ingress+egress), a DNS egress to a namespace selector, app-to-app on a named port, monitoring from another team's namespaces (namespace+pod selector, named port), egress to 0.0.0.0/0 except private ranges, ingress from an ipBlock with an except plus a pod selector. `nftguard apply` is the built binary exec'd on the JSON manifest (parse + compile + program, process start included); `nft -f` loads `nftguard render` of the same manifest (render not timed; `nft` runs through `ip netns exec`). %d repetitions.\n\n", localNode, res.Profile.scaleReps())
	fmt.Fprintln(w, "| cluster | manifest | table (chains / rules / sets / elements) | compile in process | nftguard apply | nft -f | apply / nft -f |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, s := range res.Scale {
		fmt.Fprintf(w, "| %v | %.1f MB | %d / %d / %d / %d | %s | %s | %s | %.2f |\n", s.Size, float64(s.ManifestBytes)/1e6,
			s.Chains, s.Rules, s.Sets, s.Elements, s.CompileInProcess.ms(), s.Apply.ms(), s.NftF.ms(), s.RatioApplyOverNftF)
	}
	fmt.Fprintln(w)
	res.applySplit(w)
	res.image(w, "scale", "full program time vs cluster size")
}

// applySplit says where `nftguard apply`'s wall time goes (medians of each
// part, so they need not add up exactly): reading the manifests, building
// the table and the kernel sync from apply's own summary, the rest being
// process start, opening the netlink socket, reading back the table and
// exit. A baseline binary ($BENCH_APPLY_BASELINE), when given, was timed
// in the same repetitions.
func (res *results) applySplit(w io.Writer) {
	if len(res.Scale) == 0 || res.Scale[0].ApplyRead.median() == 0 {
		return
	}
	baseline := res.Scale[0].Baseline != ""
	fmt.Fprint(w, "Where apply's time goes (medians): **read** = reading and decoding the manifests, **build** = compiling the table, **sync** = reading back our table, diffing and the netlink batch (all three from apply's own summary), **rest** = wall − read − build − sync: process start (runtime and package initialisation of a ~47 MB binary), opening netlink in the namespace, exit. **CPU** = user + system time of the process, all threads.")
	if baseline {
		fmt.Fprintf(w, " **baseline** = `%s`, exec'd alike in the same repetitions.", res.Scale[0].Baseline)
	}
	fmt.Fprint(w, "\n\n| cluster | apply wall | apply CPU | read | build | sync | rest | nft -f |")
	if baseline {
		fmt.Fprint(w, " baseline wall | baseline CPU |")
	}
	fmt.Fprint(w, "\n|---|---:|---:|---:|---:|---:|---:|---:|")
	if baseline {
		fmt.Fprint(w, "---:|---:|")
	}
	fmt.Fprintln(w)
	for _, s := range res.Scale {
		rest := s.Apply.median() - s.ApplyRead.median() - s.ApplyBuild.median() - s.ApplySync.median()
		fmt.Fprintf(w, "| %v | %s | %s | %s | %s | %s | %s | %s |", s.Size, msf(s.Apply.median()), msf(s.ApplyCPU.median()),
			msf(s.ApplyRead.median()), msf(s.ApplyBuild.median()), msf(s.ApplySync.median()), msf(rest), msf(s.NftF.median()))
		if baseline {
			fmt.Fprintf(w, " %s | %s |", msf(s.BaselineApply.median()), msf(s.BaselineCPU.median()))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

func (res *results) changeSection(w io.Writer) {
	fmt.Fprintln(w, "## 2. Change latency")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "From the programmed base table, one event at a time (each from the same base): a pod added on the benchmarked node, a local pod removed, a remote pod's label changed, a policy added. **engine** = `compose.Builder.Build` of the changed objects + `engine.Sync`, in process, as the agent runs them: one Builder and one engine that have just handled the base cluster, so the build re-derives only what the event touched and the Sync looks only at what the build changed (messages and operations from `engine.Stats`); the cluster then goes back to the base, untimed; **CLI** = `nftguard apply` of the changed manifest (process start, parse, compile, read back the table, diff, one batch); **nft -f** = the whole changed table rewritten in one transaction (`delete table` + full text, as a text-generating tool must); **cycle** = `iptables-nft-save | edit | iptables-nft-restore` on an equal-size iptables ruleset (one chain per per-pod nft chain with the same rule count, plus one FORWARD jump per chain; set elements have no counterpart because kube-router keeps them in ipsets).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| cluster | change | engine | of which Sync | msgs / ops | CLI | nft -f | save\\|edit\\|restore (rules) | nft -f / engine | cycle / engine |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, c := range res.Change {
		read := ""
		if c.Read {
			read = " (read back!)"
		}
		fmt.Fprintf(w, "| %v | %s | %s | %s | %d / %d%s | %s | %s | %s (%d) | %s | %s |\n", c.Size, c.Change, c.Engine.ms(), c.Sync.ms(),
			c.Messages, c.Operations, read, c.CLI.ms(), c.NftF.ms(), c.Cycle.ms(), c.IPTRules, times(ratio(c.NftF, c.Engine)), times(ratio(c.Cycle, c.Engine)))
	}
	fmt.Fprintln(w)
	res.image(w, "change", "per-change latency vs cluster size")
}

func (res *results) dataPathSection(w io.Writer) {
	fmt.Fprintln(w, "## 3. Data path")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "A netlab node with two routed pods, `dp/client` and `dp/server`. The load generator is Go code on %d threads inside the client pod's namespace, for %v per protocol (at most %d operations): new TCP connections to the server's port 80 (handshake, the server's close, a reset from the client), and 64-byte UDP request/response over connected sockets (a lost datagram counts nothing and costs its 200 ms timeout). With a firewall the node's table holds one policy isolating the server and admitting the client — so every new flow takes the verdict-map lookup into the server's chain — plus N policies of the synthetic cluster selecting other pods (a tenth of the pods local to this node). *No firewall* is the node without any table (and so without conntrack): the limit. *Conntrack only* is a table with one forward rule, `ct state established,related accept`: the price of any stateful firewall before its first policy, which tells conntrack's cost from nftguard's. Each of the %d repetitions builds one lab and measures every configuration in it, one after the other (the node's table replaced through the engine, its conntrack table flushed), in an order that rotates from one repetition to the next; a ratio is the median of the repetitions' own ratios, so a slow moment of the machine weighs on both sides of it.\n\n", dpWorkers, res.Profile.LoadFor, dpMaxOps, res.Profile.dpReps())
	fmt.Fprintln(w, "| configuration | table rules / elements | TCP conn/s | vs no firewall | vs conntrack only | UDP req/s | vs no firewall | vs conntrack only |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	none, _ := res.dataPath(dpNone)
	ct, _ := res.dataPath(dpConntrack)
	for _, d := range res.DataPath {
		fmt.Fprintf(w, "| %v | %d / %d | %s | %.2f | %.2f | %s | %.2f | %.2f |\n", d.Config, d.TableRules, d.TableElems,
			d.TCPConn.rate(), pairedRatio(d.TCPConn, none.TCPConn), pairedRatio(d.TCPConn, ct.TCPConn),
			d.UDPRR.rate(), pairedRatio(d.UDPRR, none.UDPRR), pairedRatio(d.UDPRR, ct.UDPRR))
	}
	fmt.Fprintln(w)
	for _, g := range res.DataPath {
		if !g.Config.Guards {
			continue
		}
		if base, ok := res.dataPath(g.Config.Policies); ok {
			fmt.Fprintf(w, "Pod guards (a chain per local pod on its interface's ingress hook that lets only the pod's own addresses in, package podguard) at %s policies, against the same table without them, paired per repetition: %.3f× TCP connections per second, %.3f× UDP requests per second.\n\n",
				human(g.Config.Policies), pairedRatio(g.TCPConn, base.TCPConn), pairedRatio(g.UDPRR, base.UDPRR))
		}
	}
	res.image(w, "datapath", "data path rate vs policies")
}

func (res *results) microSection(w io.Writer) {
	fmt.Fprintln(w, "## 5. Engine micro-benchmarks")
	fmt.Fprintln(w)
	if res.Micro.Command == "" {
		fmt.Fprintln(w, "Not run in this profile.")
		fmt.Fprintln(w)
		return
	}
	fmt.Fprintf(w, "`%s` (in the repository root, %s; the output is benchstat-ready: save two runs and compare them with `benchstat old.txt new.txt`).\n\n", res.Micro.Command, res.Micro.Duration.Round(time.Second))
	if res.Micro.Err != nil {
		fmt.Fprintf(w, "**Failed:** %v\n\n", res.Micro.Err)
	}
	fmt.Fprintf(w, "```\n%s\n```\n\n", strings.TrimSpace(res.Micro.Output))
}
