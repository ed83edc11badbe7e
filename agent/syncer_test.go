package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/apitest"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/problem"
	"github.com/nftguard/nftguard/quarantine"
)

// checkingFake is an engine.Fake with Check: the kernel it stands for
// refuses any table with a chain named "refuse-*", as the Fake refuses a
// jump to a missing chain.
type checkingFake struct {
	*engine.Fake
	checks int
}

func (f *checkingFake) Check(_ context.Context, d *engine.Desired) error {
	f.checks++
	for _, c := range d.Chains {
		if strings.HasPrefix(c.Name, "refuse-") {
			return fmt.Errorf("check table inet nftguard: %w", &engine.Error{Op: "add rule to chain", Object: c.Name, Index: 1, Message: -1})
		}
	}
	return nil
}

// refuseLabelled is the syncer's test hook: a chain the kernel refuses
// (a jump to a missing chain) per NetworkPolicy labelled bad.
func refuseLabelled(in compose.Input, res *compose.Result) {
	d := *res.Desired
	d.Chains = append([]engine.Chain(nil), d.Chains...)
	for _, np := range in.NetworkPolicies.All() {
		if np.Labels["bad"] != "" {
			d.Chains = append(d.Chains, engine.Chain{Name: "refuse-" + np.Name, Rules: []engine.Rule{{Rule: "jump no-such-chain"}}})
		}
	}
	for _, ns := range in.Namespaces {
		if ns.Labels["bad"] != "" {
			d.Chains = append(d.Chains, engine.Chain{Name: "refuse-ns-" + ns.Name, Rules: []engine.Rule{{Rule: "jump no-such-chain"}}})
		}
	}
	res.Desired = &d
}

// TestSyncerQuarantines: the syncer's part of a refused sync. The
// quarantine's search runs through the syncer's compile (its test hook
// included) and counts its checks; the rest is synced; the held object is
// reported in nftguard_quarantined_objects and as a problem, and /readyz
// says so. A refusal no new or changed object explains fails the sync.
func TestSyncerQuarantines(t *testing.T) {
	fake, err := engine.NewFake(compose.Table())
	if err != nil {
		t.Fatal(err)
	}
	eng := &checkingFake{Fake: fake}
	m := newMetrics()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	events, err := newEvents(nil, "n1", 0, m, log, func(problem.Object) types.UID { return "" })
	if err != nil {
		t.Fatal(err)
	}
	s := &syncer{eng: eng, m: m, log: log, inject: refuseLabelled, q: quarantine.New(sameContent), events: events}
	np := func(name, bad string) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name, Labels: map[string]string{"bad": bad}}}
	}
	input := func(nps ...*networkingv1.NetworkPolicy) compose.Input {
		return compose.Input{NodeName: "n1", Namespaces: []*corev1.Namespace{apitest.Namespace("a")},
			NetworkPolicies: npset.New(nps), Pods: podtest.Set([]*corev1.Pod{apitest.Pod("a", "pod", "10.0.0.1")})}
	}
	// What sync does between reading the caches and the metrics of a
	// success.
	var h health
	syncIn := func(raw compose.Input) error {
		in := s.q.Apply(raw)
		res := s.compile(&s.build, in)
		_, err := s.eng.Sync(context.Background(), res.Desired)
		if err != nil {
			iso, ierr := s.isolate(context.Background(), in, err)
			if ierr != nil {
				h.failed(ierr)
				return ierr
			}
			in, res = iso.found.In, iso.res
		}
		s.report(in, res)
		s.q.Accepted(in)
		h.succeeded(s.q.Len())
		return nil
	}
	if err := syncIn(input(np("p", ""))); err != nil {
		t.Fatal(err)
	}

	var nps []*networkingv1.NetworkPolicy
	for i := range 16 {
		bad := ""
		if i == 11 {
			bad = "x"
		}
		nps = append(nps, np(fmt.Sprintf("q%02d", i), bad))
	}
	if err := syncIn(input(nps...)); err != nil {
		t.Fatal(err)
	}
	if dump := eng.Dump(); strings.Contains(dump, "refuse-") || !strings.Contains(dump, "np_ing_a_pod") {
		t.Fatalf("table after the search:\n%s", dump)
	}
	if got := s.q.Held(); len(got) != 1 || got[0] != (quarantine.Key{Kind: quarantine.KindNetworkPolicy, Namespace: "a", Name: "q11"}) {
		t.Fatalf("held %v, want a/q11", got)
	}
	checks := testutil.ToFloat64(m.checks)
	held := testutil.ToFloat64(m.quarantined.WithLabelValues(quarantine.KindNetworkPolicy, "a", "q11"))
	if checks != float64(eng.checks) || checks < 2 || held != 1 {
		t.Fatalf("nftguard_sync_checks_total %v (the engine saw %d checks), quarantined gauge %v", checks, eng.checks, held)
	}
	if ok, body := h.ready(); !ok || !strings.Contains(body, "1 object(s) quarantined") {
		t.Fatalf("ready %v %q", ok, body)
	}

	// Unexplained: a namespace is never a suspect.
	in := input(append(nps, np("r", ""))...)
	in.Namespaces[0].Labels["bad"] = "yes"
	err = syncIn(in)
	if err == nil || !strings.Contains(err.Error(), "also refuses the table without the 1 new or changed") {
		t.Fatalf("err %v, want the unexplained refusal", err)
	}
	if ok, body := h.ready(); ok || !strings.Contains(body, "last sync failed") {
		t.Fatalf("ready %v %q", ok, body)
	}
}
