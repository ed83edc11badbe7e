package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/testns"
)

// change is one cluster event of scenario 2: the cluster after it, and the
// matching edit of the equivalent iptables ruleset.
type change struct {
	Name    string
	After   *cluster
	EditIPT func(saved string) (string, error)
}

// changeResult is scenario 2 for one change at one cluster size.
type changeResult struct {
	Size       size
	Change     string
	Engine     sample // compose.Build + engine.Sync, in process
	Sync       sample // engine.Sync alone
	Messages   int    // engine.Stats of the last repetition
	Operations int
	Read       bool // the engine dumped the kernel's table (it must not)
	CLI        sample
	NftF       sample // delete + reload the whole table with nft -f
	Cycle      sample // iptables-nft-save | edit | iptables-nft-restore
	IPTRules   int
	IPTChains  int
}

// changes returns the four events, each applied to base: a pod added on
// the benchmarked node, a local pod removed, a remote pod's label changed
// (selector sets move an address), and a policy added.
func changes(base *cluster) []change {
	// Work in the namespace of a local app1 pod: policies of kind 1 there
	// isolate it and admit app2 pods, so relabelling a remote app2 pod and
	// adding another app1 policy both reach this node's table.
	anchor := slices.IndexFunc(base.Pods, func(p *corev1.Pod) bool {
		return p.Spec.NodeName == localNode && p.Labels["app"] == "app1"
	})
	if anchor < 0 {
		anchor = slices.IndexFunc(base.Pods, func(p *corev1.Pod) bool { return p.Spec.NodeName == localNode })
	}
	nsName := base.Pods[anchor].Namespace

	added := *base
	p := pod(len(base.Pods), 0, localNode, "app1")
	p.Namespace = nsName
	added.Pods = append(slices.Clip(base.Pods), p)

	removed := *base
	removed.Pods = slices.Delete(slices.Clone(base.Pods), anchor, anchor+1)

	relabeled := *base
	moved := slices.IndexFunc(base.Pods, func(p *corev1.Pod) bool {
		return p.Namespace == nsName && p.Spec.NodeName != localNode && p.Labels["app"] == "app2"
	})
	if moved < 0 {
		moved = slices.IndexFunc(base.Pods, func(p *corev1.Pod) bool { return p.Spec.NodeName != localNode })
	}
	relabeled.Pods = slices.Clone(base.Pods)
	cp := *base.Pods[moved]
	cp.ObjectMeta = *base.Pods[moved].ObjectMeta.DeepCopy()
	cp.Labels["app"] = "app3"
	relabeled.Pods[moved] = &cp

	withPolicy := *base
	np := policy(len(base.Policies), 0, 1)
	np.ObjectMeta = metav1.ObjectMeta{Namespace: nsName, Name: "np-added"}
	np.Spec.Ingress[0].Ports = nil // all ports: a rule the namespace's others do not have
	withPolicy.Policies = append(slices.Clip(base.Policies), np)

	return []change{
		{"pod added", &added, iptAddChain},
		{"pod removed", &removed, iptRemoveChain},
		{"label changed", &relabeled, iptEditRule},
		{"policy added", &withPolicy, iptAppendRules},
	}
}

// runChange measures scenario 2 at every size of the profile.
func (r *runner) runChange() ([]changeResult, error) {
	var out []changeResult
	for _, s := range r.prof.Change {
		r.logf("change: %v", s)
		rs, err := r.changeAt(s)
		if err != nil {
			return nil, fmt.Errorf("change latency at %v: %w", s, err)
		}
		for _, c := range rs {
			r.logf("change: %v %s: engine %s (%d msgs), cli %s, nft -f %s, cycle %s", s, c.Change, c.Engine.ms(), c.Messages, c.CLI.ms(), c.NftF.ms(), c.Cycle.ms())
		}
		out = append(out, rs...)
	}
	return out, nil
}

func (r *runner) changeAt(s size) ([]changeResult, error) {
	base := newCluster(s)
	chs := changes(base)
	b0 := compose.Build(base.input())
	text0, err := engine.Render(compose.Table(), b0.Desired)
	if err != nil {
		return nil, fmt.Errorf("render base table: %w", err)
	}
	ipt0, nChains, nRules := iptablesEquivalent(b0.Desired)
	dir := filepath.Join(r.work, fmt.Sprintf("change-%d", s.Pods))
	man0, err := base.writeManifests(filepath.Join(dir, "base"))
	if err != nil {
		return nil, err
	}
	res := make([]changeResult, len(chs))
	texts := make([]string, len(chs))
	mans := make([]string, len(chs))
	for i, c := range chs {
		res[i] = changeResult{Size: s, Change: c.Name, IPTChains: nChains, IPTRules: nRules}
		b := compose.Build(c.After.input())
		if len(b.Problems) > 0 {
			return nil, fmt.Errorf("%s: invalid objects: %v", c.Name, b.Problems[0])
		}
		if texts[i], err = engine.Render(compose.Table(), b.Desired); err != nil {
			return nil, fmt.Errorf("%s: render: %w", c.Name, err)
		}
		if mans[i], err = c.After.writeManifests(filepath.Join(dir, fmt.Sprint(i))); err != nil {
			return nil, err
		}
	}
	for rep := range r.prof.Reps {
		steps := []struct {
			what string
			fn   func(ns *testns.NS) error
		}{
			{"engine", func(ns *testns.NS) error { return r.engineChanges(ns, base, chs, res) }},
			{"cli", func(ns *testns.NS) error { return r.cliChanges(ns, man0, mans, res) }},
			{"nft -f", func(ns *testns.NS) error { return nftChanges(ns, text0, texts, res) }},
			{"iptables cycle", func(ns *testns.NS) error { return cycleChanges(ns, ipt0, chs, res) }},
		}
		for _, st := range steps {
			if err := r.inNS(st.fn); err != nil {
				return nil, fmt.Errorf("%s, repetition %d: %w", st.what, rep+1, err)
			}
		}
	}
	return res, nil
}

// engineChanges programs the base table once, then for each change times
// building the changed cluster's table and syncing it, and goes back to the
// base (untimed) so every change starts from the same table. The tables
// come from one compose.Builder, as in the agent: each build follows the
// previous state, so it re-derives only what the change touched.
func (r *runner) engineChanges(ns *testns.NS, base *cluster, chs []change, res []changeResult) error {
	e, err := engine.New(compose.Table(), engine.WithNetNS(ns.Path))
	if err != nil {
		return fmt.Errorf("open engine: %w", err)
	}
	defer e.Close()
	ctx := r.ctx
	var bld compose.Builder
	in0 := base.input()
	if _, err := e.Sync(ctx, bld.Build(in0).Desired); err != nil {
		return fmt.Errorf("program base table: %w", err)
	}
	for i, c := range chs {
		in := c.After.input()
		start := time.Now()
		b := bld.Build(in)
		syncStart := time.Now()
		st, err := e.Sync(ctx, b.Desired)
		end := time.Now()
		if err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		res[i].Engine = append(res[i].Engine, end.Sub(start).Seconds())
		res[i].Sync = append(res[i].Sync, end.Sub(syncStart).Seconds())
		res[i].Messages, res[i].Operations, res[i].Read = st.Messages, st.Operations, st.Read
		if _, err := e.Sync(ctx, bld.Build(in0).Desired); err != nil {
			return fmt.Errorf("%s: back to base: %w", c.Name, err)
		}
	}
	return nil
}

// cliChanges is the same through the binary: apply the base manifests,
// then time `nftguard apply` of each changed cluster (process start, parse,
// compile, read back the kernel's table, diff, one batch).
func (r *runner) cliChanges(ns *testns.NS, man0 string, mans []string, res []changeResult) error {
	if _, err := r.nftguard(man0, "apply", "--netns", ns.Path); err != nil {
		return err
	}
	for i, m := range mans {
		start := time.Now()
		if _, err := r.nftguard(m, "apply", "--netns", ns.Path); err != nil {
			return err
		}
		res[i].CLI = append(res[i].CLI, time.Since(start).Seconds())
		if _, err := r.nftguard(man0, "apply", "--netns", ns.Path); err != nil {
			return err
		}
	}
	return nil
}

// rewrite replaces the whole table in one nft transaction, the way a tool
// that generates text and execs nft applies any change. The empty "table"
// line makes the delete valid whether or not the table exists.
func rewrite(text string) string {
	return "table inet nftguard {}\ndelete table inet nftguard\n" + text + "\n"
}

func nftChanges(ns *testns.NS, text0 string, texts []string, res []changeResult) error {
	if _, err := ns.Exec(rewrite(text0), "nft", "-f", "-"); err != nil {
		return fmt.Errorf("load base table: %w", err)
	}
	for i, t := range texts {
		d, err := timeIn(ns, rewrite(t), "nft", "-f", "-")
		if err != nil {
			return fmt.Errorf("%s: %w", res[i].Change, err)
		}
		res[i].NftF = append(res[i].NftF, d.Seconds())
		if _, err := ns.Exec(rewrite(text0), "nft", "-f", "-"); err != nil {
			return fmt.Errorf("back to base: %w", err)
		}
	}
	return nil
}

// cycleChanges loads the equivalent iptables ruleset, then times
// kube-router's way of making each change: save everything, edit the text,
// restore everything.
func cycleChanges(ns *testns.NS, ipt0 string, chs []change, res []changeResult) error {
	if _, err := ns.Exec(ipt0, "iptables-nft-restore"); err != nil {
		return fmt.Errorf("load iptables ruleset: %w", err)
	}
	for i, c := range chs {
		start := time.Now()
		saved, err := ns.Exec("", "iptables-nft-save")
		if err != nil {
			return err
		}
		edited, err := c.EditIPT(saved)
		if err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		if _, err := ns.Exec(edited, "iptables-nft-restore"); err != nil {
			return fmt.Errorf("%s: restore: %w", c.Name, err)
		}
		res[i].Cycle = append(res[i].Cycle, time.Since(start).Seconds())
		if _, err := ns.Exec(ipt0, "iptables-nft-restore"); err != nil {
			return fmt.Errorf("back to base: %w", err)
		}
	}
	return nil
}
