// Command suite runs nftguard's benchmarks — full-program scale, change
// latency, data-path rates, agent memory, the engine's micro-benchmarks,
// the denied-traffic log, ClusterNetworkPolicies and egress SNAT through
// `nftguard run` — each against the tools users would otherwise pick, in
// the same run, and writes bench/results/REPORT.md with PNG plots.
//
//	make bench                    # full profile
//	make bench BENCH_PROFILE=quick
//	make bench-smoke              # tiny sizes, one repetition, for CI
//
// It needs root, nft and iptables-nft (make deps). Every namespace it makes
// is removed, also on failure; it never touches the host's ruleset.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	if p := os.Getenv(fwdChildEnv); p != "" {
		// Scenario 9's agent child (domains_fwd.go), pinned to one CPU.
		if err := fwdChildMain(p); err != nil {
			fmt.Fprintln(os.Stderr, "bench agent child:", err)
			os.Exit(1)
		}
		return
	}
	if kind := os.Getenv(domChildEnv); kind != "" {
		// Scenario 9's child (domains_mem.go), in its own cgroup.
		if err := domainsChildMain(kind); err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
			os.Exit(1)
		}
		return
	}
	def := os.Getenv("BENCH_PROFILE")
	if def == "" {
		def = "full"
	}
	name := flag.String("profile", def, "full, quick, smoke or envelope (default from $BENCH_PROFILE, else full)")
	out := flag.String("out", "../results", "directory for REPORT.md and the plots")
	root := flag.String("root", "../..", "repository root")
	only := flag.String("only", "", "run one scenario only: scale (full program: apply vs nft -f), denied (the denied-traffic log), cnp (ClusterNetworkPolicies), egress (egress SNAT through nftguard run), domains (domainNames: data path against networks, memory of the answers, the DNS forwarder's latency and rate) or datapath (scenario 3: pod-to-pod rates against policies, with and without the pod guards); default all")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *name, *out, *root, *only); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, name, out, root, only string) error {
	prof, err := profiles(name)
	if err != nil {
		return err
	}
	if only != "" && only != "scale" && only != "denied" && only != "cnp" && only != "egress" && only != "domains" && only != "datapath" {
		return fmt.Errorf("-only: unknown scenario %q (scale, denied, cnp, egress, domains or datapath)", only)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root (network namespaces, nftables)")
	}
	if root, err = filepath.Abs(root); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("results directory: %w", err)
	}
	if err := sweepStale(os.Stderr); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "nftguard-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	r := &runner{ctx: ctx, prof: prof, root: root, work: work, tag: fmt.Sprintf("%s%d", tagPrefix, os.Getpid()), log: os.Stderr}
	res := &results{Profile: prof, Machine: describeMachine(), Plots: map[string]string{}}
	res.Machine.Commit = commit(root)
	start := time.Now()
	r.logf("profile %s, load average %s", prof.Name, res.Machine.LoadAvgAtStart)
	// Scenario 9 programs the kernel in process only: no binary.
	if only != "domains" {
		if err := r.buildBinary(); err != nil {
			return err
		}
	}
	switch only {
	case "scale":
		res.Memory.Pending = "not part of this run (-only scale)"
		r.measureScale(res, out)
	case "denied":
		res.Memory.Pending = "not part of this run (-only denied)"
		r.measureDenied(res)
	case "cnp":
		res.Memory.Pending = "not part of this run (-only cnp)"
		r.measureCNP(res)
	case "egress":
		res.Memory.Pending = "not part of this run (-only egress)"
		r.measureEgress(res, out)
	case "domains":
		res.Memory.Pending = "not part of this run (-only domains)"
		r.measureDomains(res, out)
	case "datapath":
		res.Memory.Pending = "not part of this run (-only datapath)"
		var err error
		if res.DataPath, err = r.runDataPath(); err != nil {
			res.Failures = append(res.Failures, fmt.Sprintf("data path: %v", err))
		} else if res.Plots["datapath"], err = plotDataPath(out, res.DataPath); err != nil {
			res.Failures = append(res.Failures, fmt.Sprintf("data path plot: %v", err))
		}
	default:
		r.measure(res, out)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	res.Duration = time.Since(start)
	res.Machine.LoadAvgAtFinish = loadAvg()
	write := writeReport
	if only == "domains" {
		write = writeDomainsReport
	}
	if err := write(res, out); err != nil {
		return err
	}
	fmt.Printf("\nnftguard benchmarks, profile %s, %s (report: %s)\n\n", prof.Name, res.Duration.Round(time.Second), filepath.Join(out, "REPORT.md"))
	res.summary(os.Stdout)
	if len(res.Failures) > 0 {
		return fmt.Errorf("%d scenario(s) failed: %v", len(res.Failures), res.Failures)
	}
	return nil
}

// measure runs the scenarios. A failed scenario is recorded and the others
// still run: one broken baseline must not hide the rest of the numbers.
// The data path runs last among the namespace users because netlab's
// signal handler ends the process on SIGINT once a lab exists.
func (r *runner) measure(res *results, out string) {
	fail := func(what string, err error) {
		r.logf("%s failed: %v", what, err)
		res.Failures = append(res.Failures, fmt.Sprintf("%s: %v", what, err))
	}
	var err error
	if r.prof.MemoryOnly {
		if res.EnvCompile, err = r.runEnvelopeCompile(); err != nil {
			fail("envelope compile", err)
		} else if mem, ev, err := plotEnvelope(out, res.EnvCompile); err != nil {
			fail("envelope plots", err)
		} else {
			res.Plots["envelope-memory"], res.Plots["envelope-events"] = mem, ev
		}
		if res.Memory, err = r.runMemory(); err != nil {
			fail("memory", err)
		}
		return
	}
	r.measureScale(res, out)
	if res.Change, err = r.runChange(); err != nil {
		fail("change latency", err)
	} else if res.Plots["change"], err = plotChange(out, res.Change); err != nil {
		fail("change plot", err)
	}
	if r.prof.Churn > 0 {
		if res.Memory, err = r.runMemory(); err != nil {
			fail("memory", err)
		}
	} else {
		res.Memory.Pending = "not part of the " + r.prof.Name + " profile"
	}
	if r.prof.MicroBench != "" && r.ctx.Err() == nil {
		res.Micro = r.runMicro()
		if res.Micro.Err != nil {
			fail("engine micro-benchmarks", res.Micro.Err)
		}
	}
	r.measureDenied(res)
	r.measureCNP(res)
	r.measureEgress(res, out)
	r.measureDomains(res, out)
	if res.DataPath, err = r.runDataPath(); err != nil {
		fail("data path", err)
	} else if res.Plots["datapath"], err = plotDataPath(out, res.DataPath); err != nil {
		fail("data path plot", err)
	}
}

// measureScale runs scenario 1 (scale.go).
func (r *runner) measureScale(res *results, out string) {
	var err error
	if res.Scale, err = r.runScale(); err != nil {
		r.logf("scale failed: %v", err)
		res.Failures = append(res.Failures, fmt.Sprintf("scale: %v", err))
	} else if res.Plots["scale"], err = plotScale(out, res.Scale); err != nil {
		r.logf("scale plot failed: %v", err)
		res.Failures = append(res.Failures, fmt.Sprintf("scale plot: %v", err))
	}
}

// measureDenied runs scenario 6 (deniedlog.go).
func (r *runner) measureDenied(res *results) {
	var err error
	if res.DeniedLog, err = r.runDeniedLog(); err != nil {
		r.logf("denied log failed: %v", err)
		res.Failures = append(res.Failures, fmt.Sprintf("denied log: %v", err))
	} else if res.DeniedLog.CPUErr != "" {
		r.logf("denied log agent CPU failed: %s", res.DeniedLog.CPUErr)
		res.Failures = append(res.Failures, "denied log agent CPU: "+firstLine(res.DeniedLog.CPUErr))
	}
}

// measureCNP runs scenario 7 (cnp.go).
func (r *runner) measureCNP(res *results) {
	var err error
	if res.CNP, err = r.runCNP(); err != nil {
		r.logf("cluster network policies failed: %v", err)
		res.Failures = append(res.Failures, fmt.Sprintf("cluster network policies: %v", err))
	}
}

// measureDomains runs scenario 9 (domains.go).
func (r *runner) measureDomains(res *results, out string) {
	var err error
	if res.Domains, err = r.runDomains(); err != nil {
		r.logf("domain names failed: %v", err)
		res.Failures = append(res.Failures, fmt.Sprintf("domain names: %v", err))
	} else {
		if len(res.Domains.DP) > 0 {
			if res.Plots["domains"], err = plotDomains(out, res.Domains); err != nil {
				r.logf("domain names plot failed: %v", err)
				res.Failures = append(res.Failures, fmt.Sprintf("domain names plot: %v", err))
			}
		}
		if res.Domains.Fwd != nil {
			if res.Plots["domains-forwarder"], err = plotDomainsFwd(out, res.Domains.Fwd); err != nil {
				r.logf("domain names forwarder plot failed: %v", err)
				res.Failures = append(res.Failures, fmt.Sprintf("domain names forwarder plot: %v", err))
			}
		}
	}
}

// measureEgress runs scenario 8 (egress.go) when the profile has it.
func (r *runner) measureEgress(res *results, out string) {
	if r.prof.Egress.Runs == 0 || r.ctx.Err() != nil {
		res.Egress.Spec = r.prof.Egress
		return
	}
	var err error
	if res.Egress, err = r.runEgress(); err != nil {
		r.logf("egress failed: %v", err)
		res.Failures = append(res.Failures, fmt.Sprintf("egress: %v", err))
	} else if res.Plots["egress"], err = plotEgress(out, res.Egress); err != nil {
		r.logf("egress plot failed: %v", err)
		res.Failures = append(res.Failures, fmt.Sprintf("egress plot: %v", err))
	}
}

func writeReport(res *results, out string) error {
	f, err := os.Create(filepath.Join(out, "REPORT.md"))
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	res.markdown(f)
	if err := f.Close(); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}
