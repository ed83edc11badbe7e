package quarantine

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/testns"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/podset"
)

// refusingEngine is an engine.Fake whose kernel refuses any table with a
// chain named "refuse-*", and counts checks and syncs.
type refusingEngine struct {
	*engine.Fake
	checks, syncs int
	last          *engine.Desired
}

// refusal is the kernel's error for a table with a "refuse-*" chain.
func refusal(d *engine.Desired) error {
	for _, c := range d.Chains {
		if strings.HasPrefix(c.Name, "refuse-") {
			return fmt.Errorf("sync table inet nftguard: %w", &engine.Error{Op: "add rule to chain", Object: c.Name, Index: 1, Errno: unix.ENOENT})
		}
	}
	return nil
}

func (r *refusingEngine) Check(_ context.Context, d *engine.Desired) error {
	r.checks++
	return refusal(d)
}

func (r *refusingEngine) Sync(ctx context.Context, d *engine.Desired) (engine.Stats, error) {
	r.syncs++
	if err := refusal(d); err != nil {
		return engine.Stats{}, err
	}
	r.last = d
	return r.Fake.Sync(ctx, d)
}

// The injected refusal: a chain per object labelled bad=<anything>, whose
// name carries the label value, so two versions of one object differ.
func injectBad(in compose.Input, res *compose.Result) {
	d := *res.Desired
	d.Chains = append([]engine.Chain(nil), d.Chains...)
	for _, np := range in.NetworkPolicies.All() {
		if v := np.Labels["bad"]; v != "" {
			d.Chains = append(d.Chains, engine.Chain{Name: "refuse-" + np.Name + "-" + v, Rules: []engine.Rule{{Rule: "jump no-such-chain"}}})
		}
	}
	for _, p := range in.ClusterNetworkPolicies {
		if v := p.Labels["bad"]; v != "" {
			d.Chains = append(d.Chains, engine.Chain{Name: "refuse-cnp-" + p.Name + "-" + v, Rules: []engine.Rule{{Rule: "jump no-such-chain"}}})
		}
	}
	for _, ns := range in.Namespaces {
		if ns.Labels["bad"] != "" {
			d.Chains = append(d.Chains, engine.Chain{Name: "refuse-ns-" + ns.Name, Rules: []engine.Rule{{Rule: "jump no-such-chain"}}})
		}
	}
	res.Desired = &d
}

// checkingEngine is what the harness needs of an engine: Check for the
// search, Sync for the rest.
type checkingEngine interface {
	Check(ctx context.Context, d *engine.Desired) error
	Sync(ctx context.Context, d *engine.Desired) (engine.Stats, error)
}

// harness syncs as the agent's sync loop does: Apply, compile, Sync and,
// when the kernel refuses, Search, Sync of the rest, Hold; then Accepted.
type harness struct {
	q     *Quarantine
	eng   checkingEngine
	build compose.Builder
}

func newHarness(t *testing.T) (*harness, *refusingEngine) {
	fake, err := engine.NewFake(compose.Table())
	if err != nil {
		t.Fatal(err)
	}
	eng := &refusingEngine{Fake: fake}
	return &harness{q: New(sameObject), eng: eng}, eng
}

// sameObject is the agent's notion of unchanged: equal but for the
// resource version.
func sameObject(a, b any) bool {
	ao, ok1 := a.(runtime.Object)
	bo, ok2 := b.(runtime.Object)
	if !ok1 || !ok2 {
		return false
	}
	am, bm := ao.DeepCopyObject().(metav1.Object), bo.DeepCopyObject().(metav1.Object)
	am.SetResourceVersion("")
	bm.SetResourceVersion("")
	return reflect.DeepEqual(am, bm)
}

// compile builds the table of in with b, plus the injected refusals.
func compile(b *compose.Builder, in compose.Input) *engine.Desired {
	res := b.Build(in)
	injectBad(in, &res)
	return res.Desired
}

// checkFunc is a Checker.
type checkFunc func(ctx context.Context, in compose.Input) error

func (f checkFunc) Check(ctx context.Context, in compose.Input) error { return f(ctx, in) }

// search runs a Search of in after the refused syncErr, with a Builder of
// its own, as the agent does.
func (h *harness) search(in compose.Input, syncErr error) (*Found, error) {
	var b compose.Builder
	return h.q.Search(context.Background(), in, syncErr, checkFunc(func(ctx context.Context, in compose.Input) error {
		return h.eng.Check(ctx, compile(&b, in))
	}))
}

func testPolicy(name, bad string, ingress bool) *networkingv1.NetworkPolicy {
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: name, Labels: map[string]string{}}}
	if bad != "" {
		np.Labels["bad"] = bad
	}
	np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	if ingress {
		np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
	}
	return np
}

func testInput(nps ...*networkingv1.NetworkPolicy) compose.Input {
	return compose.Input{
		NodeName:        "n1",
		Namespaces:      []*corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{}}}},
		NetworkPolicies: npset.New(nps),
		Pods: podset.NewSet(podset.FromAPIList([]*corev1.Pod{{
			ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "pod", UID: "u1"},
			Spec:       corev1.PodSpec{NodeName: "n1"},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}}},
		}})),
	}
}

// syncOnce does what the agent's sync loop does between reading the caches
// and reporting.
func syncOnce(t *testing.T, h *harness, raw compose.Input) (compose.Input, error) {
	t.Helper()
	ctx := context.Background()
	in := h.q.Apply(raw)
	if _, err := h.eng.Sync(ctx, compile(&h.build, in)); err != nil {
		f, err := h.search(in, err)
		if err != nil {
			return in, err
		}
		if _, err := h.eng.Sync(ctx, compile(&h.build, f.In)); err != nil {
			return in, err
		}
		h.q.Hold(in, f)
		in = f.In
	}
	h.q.Accepted(in)
	return in, nil
}

// names lists policies as name=their "bad" label, to compare which
// versions were kept.
func names[T metav1.Object](objs []T) string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetName()+"="+o.GetLabels()["bad"])
	}
	return strings.Join(out, ",")
}

func TestQuarantineFindsRefusedObjects(t *testing.T) {
	for _, tc := range []struct {
		n   int
		bad []int
	}{{1, []int{0}}, {100, []int{37}}, {64, []int{3, 60}}, {1000, []int{999}}, {20, []int{0, 1, 2, 3, 4}}} {
		t.Run(fmt.Sprintf("%d of %d", len(tc.bad), tc.n), func(t *testing.T) {
			s, eng := newHarness(t)
			var nps []*networkingv1.NetworkPolicy
			isBad := map[int]bool{}
			for _, i := range tc.bad {
				isBad[i] = true
			}
			for i := 0; i < tc.n; i++ {
				bad := ""
				if isBad[i] {
					bad = "x"
				}
				nps = append(nps, testPolicy(fmt.Sprintf("p%04d", i), bad, false))
			}
			synced, err := syncOnce(t, s, testInput(nps...))
			if err != nil {
				t.Fatal(err)
			}
			if synced.NetworkPolicies.Len() != tc.n-len(tc.bad) || len(s.q.held) != len(tc.bad) {
				t.Fatalf("synced %d policies, held %d; want %d and %d", synced.NetworkPolicies.Len(), len(s.q.held), tc.n-len(tc.bad), len(tc.bad))
			}
			for _, i := range tc.bad {
				h, ok := s.q.held[Key{KindNetworkPolicy, "a", fmt.Sprintf("p%04d", i)}]
				if !ok || h.kept || !strings.Contains(h.reason, "refuse-") {
					t.Errorf("p%04d: held %v %+v", i, ok, h)
				}
			}
			if err := refusal(eng.last); err != nil {
				t.Fatalf("synced a refused table: %v", err)
			}
			t.Logf("%d refused among %d new policies: %d checks", len(tc.bad), tc.n, eng.checks)
			if limit := 2*len(tc.bad)*bitLen(tc.n) + 1; eng.checks > limit {
				t.Errorf("%d checks, want at most %d", eng.checks, limit)
			}
		})
	}
}

func bitLen(n int) int {
	b := 0
	for ; n > 0; n >>= 1 {
		b++
	}
	return b
}

// TestQuarantineKeepsLastAcceptedVersion: an update the kernel refuses
// leaves the previous version in force; the object is tried again when it
// changes, and released when deleted.
func TestQuarantineKeepsLastAcceptedVersion(t *testing.T) {
	s, eng := newHarness(t)
	deny := testPolicy("deny", "", true)
	other := testPolicy("other", "", false)
	if _, err := syncOnce(t, s, testInput(deny, other)); err != nil {
		t.Fatal(err)
	}

	// The refused update of deny, with a valid new policy beside it.
	deny2 := testPolicy("deny", "v2", false)
	added := testPolicy("added", "", false)
	synced, err := syncOnce(t, s, testInput(deny2, other, added))
	if err != nil {
		t.Fatal(err)
	}
	if got := names(synced.NetworkPolicies.All()); got != "deny=,other=,added=" {
		t.Fatalf("synced %s, want deny's accepted version beside the others", got)
	}
	if h := s.q.held[Key{KindNetworkPolicy, "a", "deny"}]; !h.kept || h.obj != deny2 {
		t.Fatalf("held %+v, want the refused version, kept", h)
	}
	// The kernel holds exactly what the accepted versions compile to.
	ref, err := engine.NewFake(compose.Table())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ref.Sync(context.Background(), compose.Build(testInput(deny, other, added)).Desired); err != nil {
		t.Fatal(err)
	}
	if eng.Dump() != ref.Dump() || !strings.Contains(eng.Dump(), "jump np_ing_a_pod") {
		t.Fatalf("table after the refused update:\n%s\nwant:\n%s", eng.Dump(), ref.Dump())
	}
	probs := s.q.Problems()
	if len(probs) != 1 || !strings.Contains(probs[0].Error(), "NetworkPolicy a/deny") || !strings.Contains(probs[0].Error(), "last accepted version stays enforced") {
		t.Fatalf("problems %v", probs)
	}

	// Unchanged (a resync, or a no-op update with a new resource
	// version): no new search.
	checks := eng.checks
	deny2b := deny2.DeepCopy()
	deny2b.ResourceVersion = "99"
	if _, err := syncOnce(t, s, testInput(deny2b, other, added)); err != nil {
		t.Fatal(err)
	}
	if eng.checks != checks || len(s.q.held) != 1 {
		t.Fatalf("an unchanged held object was searched again (%d checks, %d held)", eng.checks-checks, len(s.q.held))
	}

	// Fixed: tried again and accepted.
	deny3 := testPolicy("deny", "", false)
	synced, err = syncOnce(t, s, testInput(deny3, other, added))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.q.held) != 0 || synced.NetworkPolicies.All()[0] != deny3 {
		t.Fatalf("the fixed object was not taken: held %v", s.q.held)
	}

	// Refused again, then deleted: released.
	if _, err := syncOnce(t, s, testInput(testPolicy("deny", "v4", false), other, added)); err != nil {
		t.Fatal(err)
	}
	if len(s.q.held) != 1 {
		t.Fatalf("held %v", s.q.held)
	}
	if _, err := syncOnce(t, s, testInput(other, added)); err != nil {
		t.Fatal(err)
	}
	if len(s.q.held) != 0 {
		t.Fatalf("a deleted object stays held: %v", s.q.held)
	}
}

// TestQuarantineUnexplainedRefusal: when the table is refused without any
// new or changed policy, nothing is held and the sync fails.
func TestQuarantineUnexplainedRefusal(t *testing.T) {
	s, eng := newHarness(t)
	p := testPolicy("p", "", true)
	if _, err := syncOnce(t, s, testInput(p)); err != nil {
		t.Fatal(err)
	}
	in := testInput(p, testPolicy("q", "", false))
	in.Namespaces[0].Labels["bad"] = "yes"
	_, err := syncOnce(t, s, in)
	if err == nil || !strings.Contains(err.Error(), "also refuses the table without the 1 new or changed") {
		t.Fatalf("err %v, want the unexplained refusal", err)
	}
	if len(s.q.held) != 0 || eng.checks != 1 {
		t.Fatalf("held %v after %d checks", s.q.held, eng.checks)
	}
}

// TestQuarantineRealKernel: the search against the real kernel, with 100
// local pods and 1,000 new policies of which one is refused: the table
// ends up equal to a sync of the other 999, and the search's cost is
// reported.
func TestQuarantineRealKernel(t *testing.T) {
	ns := testns.New(t, "agentq")
	eng, err := engine.New(compose.Table(), engine.WithNetNS(ns.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	s := &harness{q: New(sameObject), eng: eng}
	in := testInput()
	var podList []*corev1.Pod
	for i := 0; i < 100; i++ {
		podList = append(podList, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: fmt.Sprintf("pod%03d", i), UID: types.UID(fmt.Sprint(i)),
				Labels: map[string]string{"app": fmt.Sprintf("app%d", i%10)}},
			Spec:   corev1.PodSpec{NodeName: "n1"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.0.0.%d", i+1), PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.0.0.%d", i+1)}}},
		})
	}
	in.Pods = podset.NewSet(podset.FromAPIList(podList))
	if _, err := syncOnce(t, s, in); err != nil {
		t.Fatal(err)
	}
	port := intstr.FromInt32(80)
	for i := 0; i < 1000; i++ {
		np := testPolicy(fmt.Sprintf("np%04d", i), "", true)
		if i == 617 {
			np.Labels["bad"] = "x"
		}
		np.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app%d", i%10)}}
		np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
			From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app%d", (i+1)%10)}}}},
			Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
		}}
		in.NetworkPolicies = npset.New(append(in.NetworkPolicies.All(), np))
	}
	before := ns.MustExec(t, "", "nft", "list", "table", "inet", "nftguard")
	start := time.Now()
	raw := in
	applied := s.q.Apply(raw)
	_, syncErr := s.eng.Sync(context.Background(), compile(&s.build, applied))
	if syncErr == nil {
		t.Fatal("the kernel accepted a table with a jump to a missing chain")
	}
	failed := time.Since(start)
	if after := ns.MustExec(t, "", "nft", "list", "table", "inet", "nftguard"); after != before {
		t.Fatal("the refused sync changed the table")
	}
	f, err := s.search(applied, syncErr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.eng.Sync(context.Background(), compile(&s.build, f.In)); err != nil {
		t.Fatal(err)
	}
	s.q.Hold(applied, f)
	t.Logf("1 refused among 1000 new policies (100 local pods): refused sync %v, search and sync %v, %d check-only batches",
		failed.Round(time.Millisecond), (time.Since(start) - failed).Round(time.Millisecond), f.Checks)
	bad := Key{KindNetworkPolicy, "a", "np0617"}
	if len(f.Refused) != 1 || !engine.IsNotFound(f.Refused[bad]) {
		t.Fatalf("found %v", f.Refused)
	}
	// Why it is held: the kernel's refusal as the engine names it, without
	// the table's name.
	if h := s.q.held[bad]; !strings.HasPrefix(h.reason, `add rule to chain "refuse-np0617-x" (rule 1: "jump no-such-chain"): no such file or directory`) {
		t.Fatalf("held for %q, want the engine's refusal naming the chain", h.reason)
	}
	// The table equals a fresh sync of the 999 others.
	ref := testns.New(t, "agentqref")
	refEng, err := engine.New(compose.Table(), engine.WithNetNS(ref.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer refEng.Close()
	good := in
	all := in.NetworkPolicies.All()
	good.NetworkPolicies = npset.New(append(append([]*networkingv1.NetworkPolicy{}, all[:617]...), all[618:]...))
	if _, err := refEng.Sync(context.Background(), compose.Build(good).Desired); err != nil {
		t.Fatal(err)
	}
	got := ns.MustExec(t, "", "nft", "list", "table", "inet", "nftguard")
	want := ref.MustExec(t, "", "nft", "list", "table", "inet", "nftguard")
	if sortedLines(got) != sortedLines(want) {
		t.Fatalf("table after the search differs from a sync of the accepted policies")
	}
}

func sortedLines(s string) string {
	lines := strings.Split(s, "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func testCNP(name, bad string) *cnpv1beta1.ClusterNetworkPolicy {
	p := &cnpv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Spec: cnpv1beta1.ClusterNetworkPolicySpec{Tier: cnpv1beta1.AdminTier, Priority: 1,
			Subject: cnpv1beta1.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}}}}
	if bad != "" {
		p.Labels["bad"] = bad
	}
	return p
}

// TestQuarantineClusterNetworkPolicies: ClusterNetworkPolicies are suspects
// like NetworkPolicies: a refused update keeps the accepted version, a
// refused new one is left out, the rest (a new NetworkPolicy beside them)
// is synced, and the Event is about the ClusterNetworkPolicy
// (cluster-scoped, v1beta1).
func TestQuarantineClusterNetworkPolicies(t *testing.T) {
	s, eng := newHarness(t)
	admin := testCNP("admin", "")
	in := testInput()
	in.ClusterNetworkPolicies = []*cnpv1beta1.ClusterNetworkPolicy{admin}
	if _, err := syncOnce(t, s, in); err != nil {
		t.Fatal(err)
	}

	admin2, added, np := testCNP("admin", "v2"), testCNP("added", "x"), testPolicy("np", "", true)
	in = testInput(np)
	in.ClusterNetworkPolicies = []*cnpv1beta1.ClusterNetworkPolicy{admin2, added}
	synced, err := syncOnce(t, s, in)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(synced.ClusterNetworkPolicies); got != "admin=" {
		t.Fatalf("synced ClusterNetworkPolicies %s, want admin's accepted version only", got)
	}
	if got := names(synced.NetworkPolicies.All()); got != "np=" {
		t.Fatalf("synced NetworkPolicies %s, want np", got)
	}
	if err := refusal(eng.last); err != nil {
		t.Fatalf("synced a refused table: %v", err)
	}
	if h := s.q.held[Key{KindClusterNetworkPolicy, "", "admin"}]; !h.kept || h.obj != admin2 {
		t.Fatalf("admin held %+v, want the refused version, kept", h)
	}
	if h, ok := s.q.held[Key{KindClusterNetworkPolicy, "", "added"}]; !ok || h.kept {
		t.Fatalf("added held %v %+v, want held and not kept", ok, h)
	}
	probs := s.q.Problems()
	if len(probs) != 2 {
		t.Fatalf("problems %v", probs)
	}
	for _, p := range probs {
		if p.Object.APIVersion != "policy.networking.k8s.io/v1beta1" || p.Object.Kind != "ClusterNetworkPolicy" || p.Object.Namespace != "" {
			t.Errorf("problem names %+v, want a cluster-scoped policy.networking.k8s.io/v1beta1 ClusterNetworkPolicy", p.Object)
		}
	}
	if !strings.Contains(probs[0].Error(), "ClusterNetworkPolicy added: the kernel refuses") || !strings.Contains(probs[1].Error(), "last accepted version stays enforced") {
		t.Errorf("problems %v", probs)
	}

	// Deleted: released; the other, fixed: taken.
	fixed := testCNP("added", "")
	in = testInput(np)
	in.ClusterNetworkPolicies = []*cnpv1beta1.ClusterNetworkPolicy{fixed}
	synced, err = syncOnce(t, s, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.q.held) != 0 || len(synced.ClusterNetworkPolicies) != 1 || synced.ClusterNetworkPolicies[0] != fixed {
		t.Fatalf("held %v, synced %s", s.q.held, names(synced.ClusterNetworkPolicies))
	}
}
