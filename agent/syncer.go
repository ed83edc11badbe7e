package agent

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/nftguard/nftguard/budget"
	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/conntrack"
	"github.com/nftguard/nftguard/dnsfwd/nodedns"
	"github.com/nftguard/nftguard/egress"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/problem"
	"github.com/nftguard/nftguard/problemevents"
	"github.com/nftguard/nftguard/quarantine"
)

// syncer compiles the informer caches and syncs the engine. Only the sync
// loop calls it, so syncs never overlap.
type syncer struct {
	cfg    *Config
	src    *sources
	eng    engine.Interface
	m      *metrics
	events *problemevents.Reporter
	log    *slog.Logger
	health *health
	// build keeps the compilers' work from one sync to the next, so an
	// event costs what it changes.
	build compose.Builder
	// q remembers what the kernel accepted and holds back what it refused.
	q *quarantine.Quarantine
	// inject, in test builds only, adds to a compiled table what the
	// kernel refuses (see testhook.go); nil otherwise.
	inject func(compose.Input, *compose.Result)
	// cleared are the egress bindings conntrack was last cleaned for; nil
	// until the first successful cleaning (the previous run may have left
	// stale translations).
	cleared map[netip.Addr]egress.Binding
	// owed are the bindings of a sync whose cleaning was interrupted (at
	// most one: the next cleaning is not interruptible); the next cleaning
	// counts their translations as ours too.
	owed []map[netip.Addr]egress.Binding
	// interruptible, when set, gives the context of a conntrack cleaning,
	// cancelled when the next change asks for a sync (the debouncer's
	// interruptible); nil: never interrupted.
	interruptible func(context.Context) (context.Context, func())
	// synced, when set, is given the input of every successful sync
	// (the denied-packet log judges records by it: deniedflow.Resolver).
	synced func(compose.Input, compose.Result)
	// egress gives the compile the node's addresses and takes the
	// metrics of what was held; nil in tests that run without it.
	egress *egressState
	// dns gives the compile the DNS forwarder's addresses and takes the
	// table of each successful sync; nil without a forwarder.
	dns *nodedns.Forwarder
	// podIf gives the compile the node's pod-facing interfaces, read
	// again at each sync, and reports the pods it could not bind; nil in
	// tests that run without it.
	podIf *podIfState
}

// compile builds the desired table with b.
func (s *syncer) compile(b *compose.Builder, in compose.Input) compose.Result {
	res := b.Build(in)
	if s.inject != nil {
		s.inject(in, &res)
	}
	return res
}

// sync runs one compile and one engine sync; why is for logs and metrics.
// If the kernel refuses the batch, the objects it refuses are found and
// held back, and the rest is synced (see isolate).
func (s *syncer) sync(ctx context.Context, why reason) error {
	start := time.Now()
	raw, err := s.src.input(s.cfg)
	if err != nil {
		s.fail(errorKindSync)
		return err
	}
	if s.egress != nil {
		s.egress.input(&raw)
	}
	s.dns.Input(&raw)
	s.podIf.input(&raw)
	in := s.q.Apply(raw)
	res := s.compile(&s.build, in)
	compiled := time.Now()
	s.m.compileSeconds.Observe(compiled.Sub(start).Seconds())
	s.countProblems(res.Problems)

	st, err := s.eng.Sync(ctx, res.Desired)
	if err != nil && ctx.Err() == nil {
		s.log.Warn("the kernel refused the sync; checking which new or changed objects it refuses", "err", err)
		searched := time.Now()
		iso, ierr := s.isolate(ctx, in, err)
		if ierr == nil {
			in, res, st = iso.found.In, iso.res, iso.st
			s.log.Warn("objects quarantined: the rest of the table is in force",
				"objects", iso.found.Objects(), "checks", iso.found.Checks, "search", time.Since(searched).Round(time.Microsecond))
		}
		err = ierr
	}
	s.report(in, res)
	if err != nil {
		s.fail(errorKindSync)
		return err // the engine's errors name the table and the object
	}
	s.q.Accepted(in)
	s.dns.Synced(res)
	if s.synced != nil {
		s.synced(in, res)
	}
	mode := "incremental"
	if st.Full {
		mode = "full"
	}
	s.m.syncs.WithLabelValues("success").Inc()
	s.m.syncDuration.WithLabelValues(mode).Observe(st.Duration.Seconds())
	s.m.operations.Observe(float64(st.Operations))
	s.m.observeTable(res.Desired)
	s.m.lastSuccess.SetToCurrentTime()
	if s.egress != nil {
		s.egress.observe(res)
	}
	s.podIf.observe(res)
	if why.has(reasonDrift) {
		s.m.driftRepairs.Inc()
	}
	cleared := time.Now()
	deferred, err := s.clearConntrack(ctx, in, res.EgressBindings)
	if err != nil {
		return err
	}
	level := slog.LevelDebug
	if st.Operations > 0 || st.Full || why.has(reasonDrift) {
		level = slog.LevelInfo
	}
	s.log.Log(ctx, level, "synced",
		"mode", mode, "reasons", why.String(), "operations", st.Operations, "messages", st.Messages,
		"bytes", st.Bytes, "attempts", st.Attempts, "pods", in.Pods.Len(), "policies", in.NetworkPolicies.Len(), "cluster_policies", len(in.ClusterNetworkPolicies),
		"invalid", len(problem.Objects(res.Problems)), "quarantined", s.q.Len(),
		"compile", compiled.Sub(start).Round(time.Microsecond), "sync", st.Duration.Round(time.Microsecond),
		"conntrack", time.Since(cleared).Round(time.Microsecond), "conntrack_deferred", deferred)
	return nil
}

// report sends the compile problems and the quarantined objects to Events
// and metrics.
func (s *syncer) report(in compose.Input, res compose.Result) {
	held := s.q.Problems()
	var over []problem.Problem
	s.m.overBudget.Reset()
	for _, o := range res.OverBudget {
		which := "object"
		if o.Node {
			which = "node"
		}
		s.m.overBudget.WithLabelValues("NetworkPolicy", o.Policy.Namespace, o.Policy.Name, which).Set(1)
		over = append(over, budget.Problem(o, s.cfg.Budget))
	}
	if g := s.build.Budget(); g != nil {
		t := g.Total()
		s.m.budgetEstimate.WithLabelValues("rules").Set(float64(t.Rules))
		s.m.budgetEstimate.WithLabelValues("elements").Set(float64(t.Elements))
	}
	warnings := res.Warnings
	if s.podIf != nil {
		warnings = append(slices.Clip(warnings), layoutProblem(s.cfg.NodeName, res)...)
	}
	s.events.Report(res.Problems, warnings, held, over, problemevents.Cluster{Pods: in.Pods, Nodes: in.Nodes})
	s.m.quarantined.Reset()
	for _, k := range s.q.Held() {
		s.m.quarantined.WithLabelValues(k.Kind, k.Namespace, k.Name).Set(1)
	}
}

// checker is the part of engine.Engine the quarantine's search needs.
type checker interface {
	Check(ctx context.Context, d *engine.Desired) error
}

// isolation is a search's outcome, and the sync without what it found.
type isolation struct {
	found *quarantine.Found
	res   compose.Result
	st    engine.Stats
}

// isolate is called when the kernel refused the sync of in (held objects
// already reverted): the quarantine finds the new or changed objects the
// kernel refuses, with check-only batches, and the rest is synced; then
// they are held. It returns syncErr, extended, when they do not explain
// the refusal.
func (s *syncer) isolate(ctx context.Context, in compose.Input, syncErr error) (*isolation, error) {
	chk, ok := s.eng.(checker)
	if !ok {
		return nil, syncErr
	}
	// The search compiles with a Builder of its own: the sync's Builder
	// keeps following the real state, so the next event stays cheap.
	f, err := s.q.Search(ctx, in, syncErr, &searchChecker{s: s, chk: chk})
	if err != nil {
		return nil, err
	}
	res := s.compile(&s.build, f.In)
	st, err := s.eng.Sync(ctx, res.Desired)
	if err != nil {
		return nil, fmt.Errorf("%w (and again without %s: %w)", syncErr, f.Objects(), err)
	}
	s.q.Hold(in, f)
	return &isolation{found: f, res: res, st: st}, nil
}

// searchChecker is the quarantine.Checker of one search: it compiles as
// the syncer does (test hook included), with a Builder of its own, and
// counts every check.
type searchChecker struct {
	s     *syncer
	chk   checker
	build compose.Builder
}

func (c *searchChecker) Check(ctx context.Context, in compose.Input) error {
	c.s.m.checks.Inc()
	return c.chk.Check(ctx, c.s.compile(&c.build, in).Desired)
}

func (s *syncer) fail(kind string) {
	s.m.syncs.WithLabelValues("error").Inc()
	s.m.errors.WithLabelValues(kind).Inc()
}

// countProblems sets the invalid-objects gauge: objects, not problems (one
// policy may have several bad fields).
func (s *syncer) countProblems(problems []problem.Problem) {
	byKind := map[string]int{"NetworkPolicy": 0, cnpKind: 0, "Service": 0, "Pod": 0}
	for _, o := range problem.Objects(problems) {
		kind := o.Kind
		if _, known := byKind[kind]; !known {
			kind = "other"
		}
		byKind[kind]++
	}
	for k, n := range byKind {
		s.m.invalidObjects.WithLabelValues(k).Set(float64(n))
	}
}

func (r reason) String() string {
	names := []struct {
		r    reason
		name string
	}{{reasonStart, "start"}, {reasonChange, "change"}, {reasonDrift, "drift"}, {reasonResync, "resync"}, {reasonRetry, "retry"}}
	out := ""
	for _, n := range names {
		if r.has(n.r) {
			if out != "" {
				out += ","
			}
			out += n.name
		}
	}
	return out
}

// clearConntrack deletes conntrack entries whose egress translation the
// table no longer makes: the kernel applies NAT rules only to a flow's first
// packet. It reads the whole conntrack table, so it runs only when the
// bindings changed. The cluster's ranges are those the egress compiler
// used: the flags, the Nodes' pod ranges and the ServiceCIDR objects.
//
// A change that asks for a sync meanwhile interrupts it (deferred): that
// change goes to the kernel first, and the next sync's cleaning, which is
// not interruptible, also clears what this one would have. Under load a
// cleaning can take a hundred milliseconds, and the change waiting behind
// it can be the pod-start guard of a pod whose first packets would
// otherwise leave with the node's address.
func (s *syncer) clearConntrack(ctx context.Context, in compose.Input, bindings map[netip.Addr]egress.Binding) (deferred bool, err error) {
	if s.cleared != nil && len(s.owed) == 0 && maps.Equal(s.cleared, bindings) {
		return false, nil
	}
	cctx := ctx
	if s.interruptible != nil && len(s.owed) == 0 {
		var stop func()
		cctx, stop = s.interruptible(ctx)
		defer stop()
	}
	interrupted := func() bool { return cctx.Err() != nil && ctx.Err() == nil }
	if interrupted() {
		s.owed = append(s.owed, bindings)
		return true, nil
	}
	previous := []map[netip.Addr]conntrack.Binding{compose.ConntrackBindings(s.cleared)}
	for _, o := range s.owed {
		previous = append(previous, compose.ConntrackBindings(o))
	}
	st, err := conntrack.ClearStale(cctx, s.cfg.NetNS, compose.ConntrackBindings(bindings), conntrack.WithCIDRs(egress.PodRanges(in.ClusterCIDRs, in.Nodes), in.ServiceCIDRs),
		conntrack.WithPrevious(previous...))
	s.m.conntrackCleared.Add(float64(st.Deleted))
	if err != nil && interrupted() {
		s.owed = append(s.owed, bindings)
		return true, nil
	}
	if err != nil {
		s.m.errors.WithLabelValues(errorKindConntrack).Inc()
		return false, fmt.Errorf("table synced, but stale egress translations not cleared: %w", err)
	}
	if bindings == nil {
		bindings = map[netip.Addr]egress.Binding{}
	}
	s.cleared, s.owed = bindings, nil
	if st.Deleted > 0 {
		s.log.Info("stale egress translations cleared", "entries", st.Deleted)
	}
	return false, nil
}
