package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/tablelayout"
)

// Scenario 6: the price of logging denied traffic.
//
//   - Allowed traffic with logging on against off, at the profile's
//     policy count: both tables in the same lab and repetition, every
//     namespace opted in, so every isolated pod's drop counts and logs.
//     Allowed packets never reach those rules, so the goal is no
//     measurable cost (≥ 0.95×).
//   - The agent's CPU per 1,000 denied records a second: `nftguard run
//     --log-denied` against the real test API server, a UDP flood of
//     denied datagrams at three times the configured log rate (so the
//     kernel's limit, not the flood, sets the record rate), the agent's
//     CPU time from /proc/PID/stat over the flood minus the same time
//     idle. That part is a test behind the benchdenied build tag (the API
//     server harness runs only under testing), run as a subprocess.

// deniedCPU is one measured record rate (deniedlog_cpu_test.go writes it).
type deniedCPU struct {
	LogRate        int     // --log-rate = --log-burst
	FloodPPS       float64 // denied datagrams sent per second
	Seconds        float64 // length of each window
	RecordsPerSec  float64 // growth of nftguard_denied_log_records_total
	CPUIdle        float64 // the agent's CPU (cores) with no flood
	CPUFlood       float64 // ... during the flood
	RateLimited    float64 // nftguard_denied_log_suppressed_total{reason="rate_limit"} growth
	DeniedPackets  float64 // nftguard_denied_packets_total growth
	RecordsCounted float64 // records the agent counted in the window
	RSSIdleKB      int     // the agent's VmRSS before the flood
	RSSFloodKB     int     // ... right after it
}

// perThousand is the agent's CPU, in percent of one core, per 1,000
// records a second, idle subtracted.
func (d deniedCPU) perThousand() float64 {
	if d.RecordsPerSec == 0 {
		return 0
	}
	return 100 * (d.CPUFlood - d.CPUIdle) / (d.RecordsPerSec / 1000)
}

// deniedResult is scenario 6.
type deniedResult struct {
	Policies   int
	TableRules [2]int // off, on
	Off, On    dpResult
	CPU        []deniedCPU
	CPUCommand string
	CPUErr     string
	LoadAvg    []string // at start, after the data path, after the CPU runs
}

func (r *runner) runDeniedLog() (deniedResult, error) {
	res := deniedResult{Policies: r.prof.DeniedPolicies, LoadAvg: []string{loadAvg()}}
	if res.Policies == 0 {
		return res, nil
	}
	tables := make([]*engine.Desired, 2)
	for i, on := range []bool{false, true} {
		c := dataPathCluster(res.Policies)
		in := c.input()
		in.NodeName = dpNode
		if on {
			l := tablelayout.DefaultLogDenied()
			in.LogDenied = &l
			for _, ns := range c.Namespaces {
				ns.Annotations = map[string]string{tablelayout.AnnotationLogDenied: "true"}
			}
		}
		b := compose.Build(in)
		if len(b.Problems) > 0 {
			return res, fmt.Errorf("logging %v: invalid objects: %v", on, b.Problems[0])
		}
		tables[i] = b.Desired
		_, res.TableRules[i], _, _ = tableSize(b)
	}
	res.Off.Config, res.On.Config = dpConfig{Policies: res.Policies}, dpConfig{Policies: res.Policies}
	for rep := range r.prof.dpReps() {
		// A-B-B-A within each lab: a slow drift of the shared
		// machine weighs on both sides alike, and each side is
		// measured twice per repetition.
		a, b := rep%2, (rep+1)%2
		order := []int{a, b, b, a}
		err := r.dataPathRound(tables, order, func(i int, tcp, udp float64) {
			d := &res.Off
			if i == 1 {
				d = &res.On
			}
			d.TCPConn = append(d.TCPConn, tcp)
			d.UDPRR = append(d.UDPRR, udp)
			r.logf("denied log: data path, logging %v: %.0f TCP conn/s, %.0f UDP req/s", i == 1, tcp, udp)
		})
		if err != nil {
			return res, fmt.Errorf("denied log data path, repetition %d: %w", rep+1, err)
		}
	}
	res.LoadAvg = append(res.LoadAvg, loadAvg())
	if len(r.prof.DeniedRates) > 0 && r.ctx.Err() == nil {
		res.CPU, res.CPUCommand, res.CPUErr = r.deniedCPU()
		res.LoadAvg = append(res.LoadAvg, loadAvg())
	}
	return res, nil
}

// deniedCPU runs TestDeniedLogCPU as a subprocess and reads its JSON.
func (r *runner) deniedCPU() ([]deniedCPU, string, string) {
	path := r.work + "/denied-cpu.json"
	args := []string{"test", "-tags", "benchdenied", "-run", "^TestDeniedLogCPU$", "-count", "1", "-timeout", "10m", "-v", "."}
	cmdline := "go " + strings.Join(args, " ")
	rates := make([]string, len(r.prof.DeniedRates))
	for i, n := range r.prof.DeniedRates {
		rates[i] = strconv.Itoa(n)
	}
	r.logf("denied log: %s (rates %s, %v each)", cmdline, strings.Join(rates, ","), r.prof.DeniedFor)
	env := []string{"NFTGUARD_BENCH_DENIED_OUT=" + path, "NFTGUARD_BENCH_DENIED_RATES=" + strings.Join(rates, ","),
		"NFTGUARD_BENCH_DENIED_FOR=" + r.prof.DeniedFor.String()}
	var out []deniedCPU
	if _, err := r.testJSON("", args[1:], env, path, "the CPU", &out); err != nil {
		return nil, cmdline, err.Error()
	}
	for _, c := range out {
		r.logf("denied log: rate %d: %.0f records/s, agent CPU %.1f%% (idle %.1f%%): %.1f%% of a core per 1,000 records/s",
			c.LogRate, c.RecordsPerSec, 100*c.CPUFlood, 100*c.CPUIdle, c.perThousand())
	}
	return out, cmdline, ""
}

func (d deniedResult) ratios() (tcp, udp float64) {
	return pairedRatio(d.On.TCPConn, d.Off.TCPConn), pairedRatio(d.On.UDPRR, d.Off.UDPRR)
}

func (d deniedResult) goal() string {
	if d.Policies == 0 || len(d.On.TCPConn) == 0 {
		return "Allowed traffic with denied-traffic logging on ≥ 0.95× off: not measured in this run."
	}
	tcp, udp := d.ratios()
	s := fmt.Sprintf("Allowed traffic with denied-traffic logging on ≥ 0.95× off (%s policies): %s — TCP connections %.2f×, UDP request/response %.2f×.",
		human(d.Policies), verdict(tcp >= 0.95 && udp >= 0.95), tcp, udp)
	for _, c := range d.CPU {
		s += fmt.Sprintf(" Agent CPU at %.0f denied records/s: %.1f%% of a core over idle, %.1f%% per 1,000 records/s.",
			c.RecordsPerSec, 100*(c.CPUFlood-c.CPUIdle), c.perThousand())
	}
	if d.CPUErr != "" {
		s += " Agent CPU: not measured (see section 6)."
	}
	return s
}

func (d deniedResult) section(w io.Writer, prof profile) {
	fmt.Fprintln(w, "## 6. Denied-traffic log")
	fmt.Fprintln(w)
	if d.Policies == 0 {
		fmt.Fprintln(w, "Not part of this profile.")
		fmt.Fprintln(w)
		return
	}
	fmt.Fprintf(w, "Allowed traffic (the data-path load of section 3) through the node's table at %s policies with logging off and on (`--log-denied` defaults, every namespace annotated: each isolated pod's drop counts and goes to the shared rate-limited log chain; %d and %d rules). Both tables are measured in the same lab and repetition, twice each in the order A-B-B-A (which side is A alternates), %d repetitions; a ratio is the median of the paired on/off ratios. Load average: %s.\n\n",
		human(d.Policies), d.TableRules[0], d.TableRules[1], prof.dpReps(), strings.Join(d.LoadAvg, " → "))
	fmt.Fprintln(w, "| logging | TCP conn/s | UDP req/s |")
	fmt.Fprintln(w, "|---|---:|---:|")
	fmt.Fprintf(w, "| off | %s | %s |\n", d.Off.TCPConn.rate(), d.Off.UDPRR.rate())
	fmt.Fprintf(w, "| on | %s | %s |\n", d.On.TCPConn.rate(), d.On.UDPRR.rate())
	tcp, udp := d.ratios()
	fmt.Fprintf(w, "| **on / off** | **%.2f×** | **%.2f×** |\n\n", tcp, udp)
	fmt.Fprintf(w, "The agent's CPU per denied record: `%s` — `nftguard run --log-denied --log-rate R --log-burst R` (records as JSON to a file) against the real test API server, one lab node whose pod x/b denies all ingress; a pod floods it with UDP datagrams at 3 R a second for %v; the agent's CPU time (utime + stime from /proc/PID/stat) over the flood, and over as long idle just before. Records/s is the growth of `nftguard_denied_log_records_total`.\n\n", d.CPUCommand, prof.DeniedFor)
	if d.CPUErr != "" {
		fmt.Fprintf(w, "**Not measured:**\n\n```\n%s\n```\n\n", d.CPUErr)
		return
	}
	fmt.Fprintln(w, "| --log-rate | flood (datagrams/s) | records/s | rate-limited/s | agent CPU idle | agent CPU in flood | per 1,000 records/s | RSS before / after flood |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, c := range d.CPU {
		fmt.Fprintf(w, "| %d | %.0f | %.0f | %.0f | %.1f%% | %.1f%% | **%.1f%%** of a core | %.1f / %.1f MB |\n", c.LogRate, c.FloodPPS, c.RecordsPerSec,
			c.RateLimited/c.Seconds, 100*c.CPUIdle, 100*c.CPUFlood, c.perThousand(), mb(c.RSSIdleKB), mb(c.RSSFloodKB))
	}
	fmt.Fprintln(w)
}
