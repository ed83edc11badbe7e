package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// summaryRows adds scenario 9 to the summary table: per N, the domain
// rule's TCP and UDP p50 against the networks rules'.
func (d domainsResult) summaryRows(w io.Writer) {
	for _, n := range d.Spec.Addrs {
		dom, ok1 := d.find(domDomain, n)
		nets, ok2 := d.find(domNetworks, n)
		if !ok1 || !ok2 || len(dom.TCP.P50) == 0 || len(nets.TCP.P50) == 0 {
			continue
		}
		fmt.Fprintf(w, "| domainNames rule, %s addresses (p50 TCP conn, UDP round trip) | %s, %s | networks rules: %s, %s | domain/networks %.2f, %.2f |\n",
			human(n), usf(dom.TCP.P50.median()), usf(dom.UDP.P50.median()), usf(nets.TCP.P50.median()), usf(nets.UDP.P50.median()),
			pairedRatio(dom.TCP.P50, nets.TCP.P50), pairedRatio(dom.UDP.P50, nets.UDP.P50))
	}
	if len(d.Mem) > 0 {
		m := d.Mem
		named := ""
		if len(d.MemNamed) > 0 {
			named = fmt.Sprintf(", %.0f B with its %d-byte question name as comment", medianOf(d.MemNamed, func(x domMem) float64 { return x.perElement(x.KmemBytes) }), d.MemNamed[0].CommentBytes)
		}
		fmt.Fprintf(w, "| domainNames answers through AddTimed: %s elements in answers of %d | %.0f answers/s on one core; kernel %.0f B an element (cgroup kmem)%s | ipset: %s | |\n",
			human(m[0].Elements), m[0].Elements/m[0].Answers, medianOf(m, domMem.answersPerSec), medianOf(m, func(x domMem) float64 { return x.perElement(x.KmemBytes) }),
			named, ipsetBrief(d.IPSet))
	}
	if f := d.Fwd; f != nil {
		for _, l := range f.Lat {
			fmt.Fprintf(w, "| DNS through the forwarder (%s, %d address%s an answer; p50 / p99 / p99.9) | %s / %s / %s | direct: %s / %s / %s | added %s / %s / %s |\n",
				strings.ToUpper(l.Transport), l.Addrs, plural(l.Addrs), usf(l.Fwd[0]), usf(l.Fwd[2]), usf(l.Fwd[3]), usf(l.Direct[0]), usf(l.Direct[2]), usf(l.Direct[3]),
				usf(l.Fwd[0]-l.Direct[0]), usf(l.Fwd[2]-l.Direct[2]), usf(l.Fwd[3]-l.Direct[3]))
		}
		for _, x := range f.Rate {
			alone := ""
			if len(d.Mem) > 0 {
				alone = fmt.Sprintf("AddTimed alone (answers of %d): %.1f µs an answer", d.Mem[0].Elements/d.Mem[0].Answers, medianOf(d.Mem, domMem.cpuPerAnswer)*1e6)
			}
			fmt.Fprintf(w, "| forwarder answers (UDP, %d address%s an answer, %d pods × %d clients) | %.0f answers/s a core (%.1f µs of CPU an answer); %.0f answers/s reached | %s | |\n",
				x.Addrs, plural(x.Addrs), x.Pods, x.Clients, 1/x.cpuPerAnswer(), x.cpuPerAnswer()*1e6, x.perSec(), alone)
		}
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "es"
}

func ipsetBrief(ms []domMem) string {
	if len(ms) == 0 {
		return "not measured"
	}
	return fmt.Sprintf("%.0f answers/s; %.0f B an element (its own size), %.0f B (machine Slab + vmalloc)", medianOf(ms, domMem.answersPerSec),
		medianOf(ms, func(x domMem) float64 { return x.perElement(x.IPSetBytes) }), medianOf(ms, func(x domMem) float64 { return x.perElement(x.SlabBytes + x.VmallocBytes) }))
}

func medianOf(ms []domMem, f func(domMem) float64) float64 {
	s := make(sample, len(ms))
	for i, m := range ms {
		s[i] = f(m)
	}
	return s.median()
}

func sampleOf(ms []domMem, f func(domMem) float64) sample {
	s := make(sample, len(ms))
	for i, m := range ms {
		s[i] = f(m)
	}
	return s
}

// section writes scenario 9's part of a report.
func (d domainsResult) section(w io.Writer, plots map[string]string) {
	fmt.Fprintln(w, "## 9. ClusterNetworkPolicy domainNames")
	fmt.Fprintln(w)
	s := d.Spec
	if len(s.Addrs) == 0 && s.Names == 0 {
		fmt.Fprintln(w, "Not part of this profile.")
		fmt.Fprintln(w)
		return
	}
	fmt.Fprintf(w, "Load average: %s; the scenario took %s.\n\n", strings.Join(d.LoadAvg, " → "), d.Duration.Round(time.Second))
	if len(d.DP) > 0 {
		d.dataPathSection(w, plots)
	}
	if len(d.Mem) > 0 {
		d.memorySection(w)
	}
	if d.Fwd != nil {
		d.fwdSection(w, plots)
	}
}

func (d domainsResult) dataPathSection(w io.Writer, plots map[string]string) {
	s := d.Spec
	fmt.Fprintf(w, "### Data path: a domainNames rule against networks rules with the same addresses\n\n")
	fmt.Fprintf(w, "Section 3's lab (node `%s`, pods `dp/client` 10.100.0.2 and `dp/server` 10.100.0.3; the server isolated by a NetworkPolicy that admits the client, so every accepted flow goes on through the server's ingress chain) with one Admin ClusterNetworkPolicy whose subject is `dp/client`: an egress rule `Accept` to the client's N destination addresses, then a rule `Deny` to `0.0.0.0/0` and `::/0`. The N addresses are N−1 from 198.18.0.0/15 (set elements only, never a packet's destination) and, last, the server's. Tables are `compose.Build` of the objects, as the agent compiles them:\n\n", dpNode)
	fmt.Fprintf(w, "- **domainNames**: the accept rule is `domainNames: [\"%s\"]`; its compiled timeout set (`ipv4_addr . ipv4_addr`, a hash) is filled through `Engine.AddTimed` in answers of 10 elements `10.100.0.2 . ADDR` (timeout 1 h), as the DNS forwarder fills it; before the fill a TCP connection is checked to be dropped, after it the set is read back (`ReadTimed`) and must hold N elements. The client's chain: `ip saddr . ip daddr @cnp_dns_…_4 goto np_ingress`.\n", domPattern)
	fmt.Fprintf(w, "- **networks rules**: the accept rules list the same N addresses as /32s within the API's limits, 25 networks a peer and 25 peers a rule, so ⌈N/625⌉ rules, each compiled to one interval set of its ≤ 625 addresses (`ip daddr @cnp_…_net4 goto np_ingress`); the server's address is in the last rule, so each new flow is looked up in every rule's set (the worst place for it).\n")
	fmt.Fprintf(w, "- **one interval set** (only where N > 625): what the compiler would make of one rule with all N networks, which the API does not admit: the compiled set of a one-rule policy given all N addresses (in address order, as the compiler lists them) after compiling. This is the exact like-for-like of one lookup against one lookup.\n")
	fmt.Fprintf(w, "- **no firewall**: no table (and so no conntrack).\n\n")
	fmt.Fprintf(w, "Load: %d threads in the client's namespace for %v per protocol; **TCP** = one new connection to the server's port 80, timed from `connect` to the server's close (handshake, accept, FIN; the client resets); **UDP** = a 64-byte datagram from a fresh socket bound to a source port used once per configuration, and its echo (a lost datagram counts as lost, not timed); a thread stops after %d such flows, its source ports, so a UDP run can end before %v. Both are new flows every time, so every operation's first packet is judged by the client's egress chain; over the suite's usual connected UDP sockets only a socket's first datagram would be. Each of the %d repetitions builds one lab and measures every configuration in it in an order rotating from repetition to repetition, each in a fresh table with conntrack flushed. p50 and p99 are of each repetition's operations; the table shows the median over repetitions (min–max), and a ratio is the median of the repetitions' own ratios.\n\n",
		dpWorkers, s.LoadFor, udpPortsPerWorker, s.LoadFor, s.Reps)
	fmt.Fprintln(w, "| configuration | table rules / elements | client egress chain rules | TCP p50 | TCP p99 | TCP conn/s | UDP p50 | UDP p99 | UDP round trips/s (lost) |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, x := range d.DP {
		fmt.Fprintf(w, "| %v | %d / %d | %d | %s | %s | %s | %s | %s | %s (%d) |\n", x.Config, x.Rules, x.Elems, x.EgressRules,
			x.TCP.P50.usRange(), x.TCP.P99.usRange(), x.TCP.Rate.rate(), x.UDP.P50.usRange(), x.UDP.P99.usRange(), x.UDP.Rate.rate(), x.UDP.Lost)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Ratios (paired, medians of the repetitions' own ratios; 1.00 = the same, above 1 = the domain rule slower):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| N | domain / networks rules: TCP p50 | TCP p99 | UDP p50 | UDP p99 | domain / one interval set: TCP p50 | TCP p99 | UDP p50 | UDP p99 | domain / no firewall: TCP p50 | UDP p50 |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	none, _ := d.find(domNone, 0)
	for _, n := range s.Addrs {
		dom, ok1 := d.find(domDomain, n)
		nets, ok2 := d.find(domNetworks, n)
		if !ok1 || !ok2 {
			continue
		}
		one := "— | — | — | —"
		if o, ok := d.find(domOneSet, n); ok {
			one = fmt.Sprintf("%.2f | %.2f | %.2f | %.2f", pairedRatio(dom.TCP.P50, o.TCP.P50), pairedRatio(dom.TCP.P99, o.TCP.P99),
				pairedRatio(dom.UDP.P50, o.UDP.P50), pairedRatio(dom.UDP.P99, o.UDP.P99))
		}
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %.2f | %.2f | %s | %.2f | %.2f |\n", human(n),
			pairedRatio(dom.TCP.P50, nets.TCP.P50), pairedRatio(dom.TCP.P99, nets.TCP.P99), pairedRatio(dom.UDP.P50, nets.UDP.P50), pairedRatio(dom.UDP.P99, nets.UDP.P99),
			one, pairedRatio(dom.TCP.P50, none.TCP.P50), pairedRatio(dom.UDP.P50, none.UDP.P50))
	}
	fmt.Fprintln(w)
	if name, ok := plots["domains"]; ok {
		fmt.Fprintf(w, "![p50 and p99 of new TCP connections and UDP round trips against N](%s)\n\n", name)
	}
}

func (d domainsResult) memorySection(w io.Writer) {
	s := d.Spec
	m := d.Mem[0]
	fmt.Fprintf(w, "### Memory and rate of the answers: %s names × %d addresses for one pod\n\n", human(s.Names), s.PerName)
	fmt.Fprintf(w, "%s elements `10.100.0.2 . ADDR` (distinct addresses from 198.18.0.0/15, timeout 1 h) in the domain rule's timeout set, added through `Engine.AddTimed` one answer of %d at a time, as the forwarder adds them, once without comments and once with each answer's question name as the comment of its elements, as the agent adds them (%s calls, each one netlink batch and its acknowledgement), in a fresh namespace whose table was programmed by `Sync` first. The adding process is this program again as a child in a memory cgroup of its own (cgroup v1) from its first instruction, pinned to one CPU (`taskset`) with `GOMAXPROCS=1`. **Kernel memory** is the growth of the cgroup's `memory.kmem.usage_in_bytes` across the adds: the kernel charges set elements to the cgroup of the process whose netlink message creates them. It does not see allocations made without accounting (the hash table's bucket array); the machine's `Slab` and `VmallocUsed` growth over the same seconds (`/proc/meminfo`) are shown for that, but they include every other process on the machine. **CPU** is the child's user + system time over the adds (the kernel's work on each batch runs in the sender's system call). Then the set is read back and must hold every element.\n\n",
		human(m.Elements), s.PerName, human(m.Answers))
	fmt.Fprintf(w, "**ipset baseline**: the same %s pairs in an `ipset` of type `hash:ip,port,ip` with `timeout` (port fixed at tcp:0; `hash:net,net`, the plain address-pair type, is not built into this kernel), one `IPSET_CMD_ADD` netlink request and acknowledgement per element (ipset's protocol has one element a request), 10 per answer, through github.com/vishvananda/netlink, in the same kind of child and cgroup; ipset's own *Size in memory* is shown too. %d repetitions each, fresh namespace and cgroup every time; median (min–max).\n\n",
		human(m.Elements), s.MemReps)
	fmt.Fprintln(w, "| | answers/s (one core) | wall for all | CPU an answer | kernel memory (cgroup kmem) | an element | machine Slab growth | machine vmalloc growth | ipset's own size |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	row := func(name string, ms []domMem, ipset bool) {
		if len(ms) == 0 {
			fmt.Fprintf(w, "| %s | not measured |||||||\n", name)
			return
		}
		ipsz := "—"
		if ipset {
			ipsz = mibRange(sampleOf(ms, func(x domMem) float64 { return float64(x.IPSetBytes) }))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name,
			sampleOf(ms, domMem.answersPerSec).rate(),
			sampleOf(ms, func(x domMem) float64 { return x.Seconds }).ms(),
			sampleOf(ms, domMem.cpuPerAnswer).usRange(),
			mibRange(sampleOf(ms, func(x domMem) float64 { return float64(x.KmemBytes) })),
			bytesRange(sampleOf(ms, func(x domMem) float64 { return x.perElement(x.KmemBytes) })),
			mibRange(sampleOf(ms, func(x domMem) float64 { return float64(x.SlabBytes) })),
			mibRange(sampleOf(ms, func(x domMem) float64 { return float64(x.VmallocBytes) })),
			ipsz)
	}
	row("nftguard AddTimed, no comment", d.Mem, false)
	if len(d.MemNamed) > 0 {
		row(fmt.Sprintf("nftguard AddTimed, each answer's question name as comment (%d B, `%s`…)", d.MemNamed[0].CommentBytes, memName(0)), d.MemNamed, false)
	}
	row("ipset, one add a request", d.IPSet, true)
	fmt.Fprintln(w)
	if len(d.MemNamed) > 0 {
		kmem := func(ms []domMem) sample {
			return sampleOf(ms, func(x domMem) float64 { return x.perElement(x.KmemBytes) })
		}
		fmt.Fprintf(w, "The comment (the agent stores the answer's question name with each element, `nft list set` shows it): %s an element with it, %s without, paired difference %.0f B for a %d-byte name.\n\n",
			bytesRange(kmem(d.MemNamed)), bytesRange(kmem(d.Mem)), pairedDiff(kmem(d.MemNamed), kmem(d.Mem)), d.MemNamed[0].CommentBytes)
	}
	if len(d.IPSet) > 0 {
		perElem := func(ms []domMem, f func(domMem) int64) sample {
			return sampleOf(ms, func(x domMem) float64 { return x.perElement(f(x)) })
		}
		machine := func(x domMem) int64 { return x.SlabBytes + x.VmallocBytes }
		fmt.Fprintf(w, "Bytes an element: nftguard %s (cgroup kmem), %s (machine Slab + vmalloc); ipset %s (cgroup kmem: ipset's allocations are not charged to a cgroup), %s (its own size in memory), %s (machine Slab + vmalloc).\n\n",
			bytesRange(perElem(d.Mem, func(x domMem) int64 { return x.KmemBytes })), bytesRange(perElem(d.Mem, machine)),
			bytesRange(perElem(d.IPSet, func(x domMem) int64 { return x.KmemBytes })), bytesRange(perElem(d.IPSet, func(x domMem) int64 { return x.IPSetBytes })),
			bytesRange(perElem(d.IPSet, machine)))
		// The machine's counters move with every other process: a
		// repetition in which one shrank has no ratio.
		mr := "not comparable in this run (the machine's Slab + vmalloc shrank during some adds: other processes freed more than the set took)"
		if nm, ni := perElem(d.Mem, machine), perElem(d.IPSet, machine); nm.min() > 0 && ni.min() > 0 {
			mr = fmt.Sprintf("%.2f×", pairedRatio(nm, ni))
		}
		fmt.Fprintf(w, "nftguard / ipset (paired by repetition): answers/s %.2f×; kernel memory, nftguard's cgroup kmem against ipset's own size, %.2f×; machine Slab + vmalloc against machine Slab + vmalloc: %s.\n\n",
			pairedRatio(sampleOf(d.Mem, domMem.answersPerSec), sampleOf(d.IPSet, domMem.answersPerSec)),
			pairedRatio(perElem(d.Mem, func(x domMem) int64 { return x.KmemBytes }), perElem(d.IPSet, func(x domMem) int64 { return x.IPSetBytes })), mr)
	}
}

// pairedDiff is the median of the repetitions' own differences b − a.
func pairedDiff(b, a sample) float64 {
	n := min(len(a), len(b))
	ds := make(sample, n)
	for i := range n {
		ds[i] = b[i] - a[i]
	}
	return ds.median()
}

func (d domainsResult) fwdSection(w io.Writer, plots map[string]string) {
	s, f := d.Spec, d.Fwd
	fmt.Fprintf(w, "### The DNS forwarder: the latency it adds, answers per core, its heap\n\n")
	fmt.Fprintf(w, "A lab of its own: node `%s` with pods `fw/sub0`…`fw/sub%d`, which an Admin ClusterNetworkPolicy selects (egress `Accept` to `domainNames: [\"%s\"]`, then `Deny` 100.64.0.0/10), and `fw/plain`, which nothing selects; the external host `dns` is the cluster DNS, a real DNS server (`internal/dnslab`, github.com/miekg/dns, in this process) whose zone gives `qK.nM.bench.example` M A records, new addresses of 100.64.0.0/10 for every K, TTL %d s. The table is `compose.Build` of these objects with the cluster DNS and the forwarder's addresses (`clusterpolicy.DNS`), so the subjects' DNS to the cluster DNS (UDP and TCP) is redirected to the forwarder while its heartbeat lives. **The agent** is this program again as a child process pinned to one CPU (`taskset`) with `GOMAXPROCS=1`: it syncs that table into the node through the engine and runs `dnsfwd.Forwarder` with `Config.NetNS` the node's namespace (listening on the node's address of the DNS host's link, port %d) and its heartbeat, committing each answer with `Engine.AddTimed` before relaying it, with the question name as the elements' comment, as the agent (`dnsfwd/nodedns`) does. The load generators and the DNS server run in this process, on any CPU.\n\n",
		dpNode, max(s.RatePods, 1)-1, domPattern, fwdTTL, fwdPort)
	fmt.Fprintf(w, "**Latency.** For each transport and answer size, %d names in each of %d labs, one query at a time, each from a fresh socket (a new UDP socket, or a new TCP connection, as a stub resolver makes them): each name is resolved from `fw/sub0`, through the redirect and the forwarder, which commits its elements to the kernel before replying, and from `fw/plain` directly from the same server, alternating which goes first. A query is timed from its socket's creation to its reply read (a TCP query so includes its handshake, and through the forwarder the forwarder's own connection to the cluster DNS). Afterwards the forwarder must have committed exactly the answers `fw/sub0` got (so every forwarded answer was committed and no direct one went through the forwarder) and the set must hold every element they named (%s). Percentiles are of every query of the labs together; *added* is the difference of the two percentiles, *ratio* their quotient; the last columns are each lab's p99.\n\n",
		s.FwdQueries, s.FwdReps, heldText(f))
	fmt.Fprintln(w, "| transport, addresses an answer | queries each way | direct p50 | p90 | p99 | p99.9 | forwarder p50 | p90 | p99 | p99.9 | added p50 | added p99 | added p99.9 | ratio p50 | ratio p99 | p99 of each lab: direct; forwarder |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, l := range f.Lat {
		fmt.Fprintf(w, "| %s, %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %.2f | %s; %s |\n", strings.ToUpper(l.Transport), l.Addrs, l.Queries,
			usf(l.Direct[0]), usf(l.Direct[1]), usf(l.Direct[2]), usf(l.Direct[3]), usf(l.Fwd[0]), usf(l.Fwd[1]), usf(l.Fwd[2]), usf(l.Fwd[3]),
			usf(l.Fwd[0]-l.Direct[0]), usf(l.Fwd[2]-l.Direct[2]), usf(l.Fwd[3]-l.Direct[3]), l.Fwd[0]/l.Direct[0], l.Fwd[2]/l.Direct[2], usList(l.DirectP99), usList(l.FwdP99))
	}
	fmt.Fprintln(w)
	if name, ok := plots["domains-forwarder"]; ok {
		fmt.Fprintf(w, "![DNS latency percentiles, through the forwarder and direct](%s)\n\n", name)
	}
	fmt.Fprintf(w, "**Answers per core.** In the last lab, %d subject pods × %d clients each, every client a UDP socket of its own asking one new name after another (the next once the reply came, or after 2 s without one), for %v per answer size; the agent child's CPU (user + system, `getrusage`, which includes the kernel's work in its system calls: the sockets, each commit's netlink batch) over the run, divided by the answers it committed, is the CPU an answer; its inverse is what one core can serve. The load generators and the DNS server share the machine with it, so the rate reached is lower than that.\n\n",
		s.RatePods, s.RateClients, s.RateFor)
	fmt.Fprintln(w, "| addresses an answer | answers committed | answers/s reached | failed | agent CPU user + system | CPU an answer | answers/s a core | agent heap, most sampled |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, x := range f.Rate {
		fmt.Fprintf(w, "| %d | %d | %.0f | %d | %.2f s + %.2f s | %.1f µs | %.0f | %.1f MiB |\n", x.Addrs, x.Committed, x.perSec(), x.Failed, x.User, x.Sys,
			x.cpuPerAnswer()*1e6, 1/x.cpuPerAnswer(), float64(x.HeapMax)/(1<<20))
	}
	fmt.Fprintln(w)
	if len(d.Mem) > 0 {
		fmt.Fprintf(w, "For comparison, `AddTimed` alone (the memory measurement above: answers of %d, no sockets, no DNS): %s µs of CPU an answer, %s answers/s on one core.\n\n",
			d.Mem[0].Elements/d.Mem[0].Answers, fmt.Sprintf("%.1f", medianOf(d.Mem, domMem.cpuPerAnswer)*1e6), sampleOf(d.Mem, domMem.answersPerSec).rate())
	}
	grew := float64(f.HeapEnd) - float64(f.HeapStart)
	verdict := fmt.Sprintf("it grew by %.1f KiB, %.1f B an answer", grew/1024, grew/float64(f.Answers))
	if grew < 64<<10 {
		verdict = fmt.Sprintf("%+.1f KiB: no state kept per name or per answer (what an answer adds lives in the kernel's set only)", grew/1024)
	}
	fmt.Fprintf(w, "**The forwarder's heap** (the agent child's live heap objects, `runtime/metrics`, after a collection): %.2f MiB once the redirect was alive, before the first query; %.2f MiB after the last, %d committed answers later: %s. During the rate runs, sampled every 10 ms, the heap's objects reached %.1f MiB: that count includes what is garbage and not yet collected, so it follows the collector's pace under load (GOGC=100 on one busy CPU), not state held.\n\n",
		float64(f.HeapStart)/(1<<20), float64(f.HeapEnd)/(1<<20), f.Answers, verdict, float64(f.HeapMax)/(1<<20))
}

func heldText(f *domFwd) string {
	parts := make([]string, len(f.Held))
	for i := range f.Held {
		parts[i] = fmt.Sprintf("%d of %d", f.Held[i], f.Expected[i])
	}
	return "held: " + strings.Join(parts, ", ")
}

func usList(s sample) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = usf(v)
	}
	return strings.Join(parts, ", ")
}

func mibRange(s sample) string {
	return fmt.Sprintf("%.1f MiB (%.1f–%.1f)", s.median()/(1<<20), s.min()/(1<<20), s.max()/(1<<20))
}

func bytesRange(s sample) string {
	return fmt.Sprintf("%.0f B (%.0f–%.0f)", s.median(), s.min(), s.max())
}

// writeDomainsReport writes REPORT.md of `-only domains`: the machine,
// scenario 9's summary rows and its section.
func writeDomainsReport(res *results, out string) error {
	f, err := os.Create(filepath.Join(out, "REPORT.md"))
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	res.header(f, "nftguard benchmarks: ClusterNetworkPolicy domainNames", res.Profile.Domains.Reps)
	if len(res.Failures) > 0 {
		fmt.Fprintln(f, "**Failures in this run:**")
		for _, x := range res.Failures {
			fmt.Fprintf(f, "- %s\n", x)
		}
		fmt.Fprintln(f)
	}
	fmt.Fprintln(f, "| scenario | nftguard | baseline | ratio |")
	fmt.Fprintln(f, "|---|---:|---:|---:|")
	res.Domains.summaryRows(f)
	fmt.Fprintln(f)
	res.Domains.section(f, res.Plots)
	if err := f.Close(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	// The measurements themselves, for plots and comparisons later.
	b, err := json.MarshalIndent(res.Domains, "", " ")
	if err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(out, "domains.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}
