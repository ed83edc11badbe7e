package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/internal/testns"
)

// scaleResult is scenario 1 at one cluster size.
type scaleResult struct {
	Size               size
	Chains, Rules      int
	Sets, Elements     int
	ManifestBytes      int64
	Apply, NftF        sample // seconds
	CompileInProcess   sample // compose.Build alone, for context
	RenderBytes        int
	ApplyOutput        string // apply's own summary line (last repetition)
	RatioApplyOverNftF float64
	// Where apply's time goes, from its process accounting and its own
	// summary: CPU time of the process (all threads), and the wall time
	// of reading the manifests, building the table and the kernel sync.
	ApplyCPU                   sample
	ApplyRead, ApplyBuild      sample
	ApplySync                  sample
	Baseline                   string // $BENCH_APPLY_BASELINE: another nftguard binary, timed alike
	BaselineApply, BaselineCPU sample
}

// applyTimes is one timed `nftguard apply`.
type applyTimes struct {
	wall, cpu         time.Duration
	read, build, sync time.Duration // from apply's summary; 0 when it does not say
	out               string
}

// Apply's summary lines: "table … synced in D: …" and "N objects read in
// D, table built in D" (the latter since the one-pass reading).
var (
	syncedIn = regexp.MustCompile(`synced in ([0-9.]+[µmn]?s)`)
	phasesIn = regexp.MustCompile(`objects read in ([0-9.]+[µmn]?s), table built in ([0-9.]+[µmn]?s)`)
)

// apply runs bin's `apply` of manifest into ns and times it: wall time
// from exec to exit (process start included) and the process's CPU time.
// Any stderr fails it, as in r.nftguard.
func (r *runner) apply(bin, manifest, netns string) (applyTimes, error) {
	cmd := exec.CommandContext(r.ctx, bin, "apply", "-f", manifest, "--node-name", localNode, "--netns", netns)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t := applyTimes{wall: time.Since(start)}
	if err != nil {
		return t, fmt.Errorf("%s apply: %w: %s", bin, err, strings.TrimSpace(stderr.String()))
	}
	if s := expectedWarnings(stderr.String()); s != "" {
		return t, fmt.Errorf("%s apply: unexpected stderr: %s", bin, s)
	}
	t.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	t.out = strings.TrimSpace(stdout.String())
	if m := syncedIn.FindStringSubmatch(t.out); m != nil {
		t.sync, _ = time.ParseDuration(m[1])
	}
	if m := phasesIn.FindStringSubmatch(t.out); m != nil {
		t.read, _ = time.ParseDuration(m[1])
		t.build, _ = time.ParseDuration(m[2])
	}
	return t, nil
}

// runScale times `nftguard apply` of generated manifests end to end, and
// `nft -f` of `nftguard render` of the same manifests, each repetition in
// a fresh namespace.
func (r *runner) runScale() ([]scaleResult, error) {
	var out []scaleResult
	for _, s := range r.prof.Scale {
		r.logf("scale: %v", s)
		c := newCluster(s)
		dir := filepath.Join(r.work, fmt.Sprintf("scale-%d", s.Pods))
		path, err := c.writeManifests(dir)
		if err != nil {
			return nil, err
		}
		res := scaleResult{Size: s, ManifestBytes: fileSize(path), Baseline: os.Getenv("BENCH_APPLY_BASELINE")}
		build, err := repeat(r.prof.Reps, func(int) (time.Duration, error) {
			start := time.Now()
			b := compose.Build(c.input())
			if len(b.Problems) > 0 {
				return 0, fmt.Errorf("synthetic cluster has invalid objects: %v", b.Problems[0])
			}
			res.Chains, res.Rules, res.Sets, res.Elements = tableSize(b)
			return time.Since(start), nil
		})
		if err != nil {
			return nil, fmt.Errorf("compile %v: %w", s, err)
		}
		res.CompileInProcess = build
		text, err := r.render(path)
		if err != nil {
			return nil, err
		}
		res.RenderBytes = len(text)
		// Alternate the tools within each repetition so that a noisy
		// moment hurts all of them, not one.
		for rep := range r.prof.scaleReps() {
			err := r.inNS(func(ns *testns.NS) error {
				t, err := r.apply(r.bin, path, ns.Path)
				if err != nil {
					return err
				}
				res.Apply = append(res.Apply, t.wall.Seconds())
				res.ApplyCPU = append(res.ApplyCPU, t.cpu.Seconds())
				res.ApplyRead = append(res.ApplyRead, t.read.Seconds())
				res.ApplyBuild = append(res.ApplyBuild, t.build.Seconds())
				res.ApplySync = append(res.ApplySync, t.sync.Seconds())
				res.ApplyOutput = t.out
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("apply %v, repetition %d: %w", s, rep+1, err)
			}
			if res.Baseline != "" {
				err := r.inNS(func(ns *testns.NS) error {
					t, err := r.apply(res.Baseline, path, ns.Path)
					res.BaselineApply = append(res.BaselineApply, t.wall.Seconds())
					res.BaselineCPU = append(res.BaselineCPU, t.cpu.Seconds())
					return err
				})
				if err != nil {
					return nil, fmt.Errorf("baseline apply %v, repetition %d: %w", s, rep+1, err)
				}
			}
			err = r.inNS(func(ns *testns.NS) error {
				d, err := timeIn(ns, text, "nft", "-f", "-")
				res.NftF = append(res.NftF, d.Seconds())
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("nft -f %v, repetition %d: %w", s, rep+1, err)
			}
		}
		res.RatioApplyOverNftF = ratio(res.Apply, res.NftF)
		r.logf("scale: %v: apply %s (cpu %s; read %s, build %s, sync %s), nft -f %s", s, res.Apply.ms(), res.ApplyCPU.ms(),
			res.ApplyRead.ms(), res.ApplyBuild.ms(), res.ApplySync.ms(), res.NftF.ms())
		if res.Baseline != "" {
			r.logf("scale: %v: baseline %s apply %s (cpu %s)", s, res.Baseline, res.BaselineApply.ms(), res.BaselineCPU.ms())
		}
		out = append(out, res)
	}
	return out, nil
}

// tableSize counts the desired table's objects.
func tableSize(b compose.Result) (chains, rules, sets, elements int) {
	for _, ch := range b.Desired.Chains {
		rules += len(ch.Rules)
	}
	for _, s := range b.Desired.Sets {
		elements += len(s.Elements)
	}
	return len(b.Desired.Chains), rules, len(b.Desired.Sets), elements
}
