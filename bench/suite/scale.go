package main

import (
	"fmt"
	"path/filepath"
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
		res := scaleResult{Size: s, ManifestBytes: fileSize(path)}
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
		// Alternate the two tools within each repetition so that a noisy
		// moment hurts both, not one.
		for rep := range r.prof.Reps {
			err := r.inNS(func(ns *testns.NS) error {
				start := time.Now()
				out, err := r.nftguard(path, "apply", "--netns", ns.Path)
				if err != nil {
					return err
				}
				res.Apply = append(res.Apply, time.Since(start).Seconds())
				res.ApplyOutput = out
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("apply %v, repetition %d: %w", s, rep+1, err)
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
		r.logf("scale: %v: apply %s, nft -f %s", s, res.Apply.ms(), res.NftF.ms())
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
