package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/problem"
)

// When the kernel refuses a sync's batch, no single object may stop
// enforcement for the others (docs/design.md, principle 7). The compilers check
// what they can, but the kernel has the last word; what it refuses is found
// here and held back ("quarantined"), and everything else is synced:
//
//   - Suspects are the NetworkPolicies, ClusterNetworkPolicies and Services
//     that are new or changed since the last successful sync: the kernel
//     accepted all the others together. NetworkPolicies and Services are
//     what tenants write freely; ClusterNetworkPolicies are written by
//     administrators, but the kernel may refuse them all the same, and one
//     must not stop the sync of everything else. Pods, Namespaces and
//     Nodes reach the table only through structure the compilers generate,
//     and holding a pod back would take away its isolation, so they are
//     never suspects: a refusal the suspects do not explain stays a failed
//     sync (retried, /readyz not ready).
//   - The search sends only check-only batches (engine.Check): the kernel
//     validates them and changes nothing, so the node is enforced exactly
//     as before while it runs. Only the final Sync changes the table.
//   - A held object that the last successful sync included keeps that
//     version in the table: "an error never leaves a node more open than
//     before it". Dropping it instead would remove the isolation its old
//     version gave. A held object that is new is left out; it was never
//     enforced.
//   - A held object is tried again when its content changes (the owner
//     fixed it) or when it is deleted.

// objKey names one API object.
type objKey struct{ kind, namespace, name string }

func (k objKey) String() string { return k.kind + " " + k.namespace + "/" + k.name }

func policyKey(np *networkingv1.NetworkPolicy) objKey {
	return objKey{"NetworkPolicy", np.Namespace, np.Name}
}

func serviceKey(s *corev1.Service) objKey { return objKey{"Service", s.Namespace, s.Name} }

func cnpKey(p *cnpv1beta1.ClusterNetworkPolicy) objKey { return objKey{cnpKind, "", p.Name} }

// heldObject is one quarantined object.
type heldObject struct {
	obj    any    // the version the kernel refused
	reason string // the kernel's error when the object was checked
	kept   bool   // its last accepted version stays in the table
}

// quarantine is the syncer's memory of what the kernel accepted and what it
// refused. Only the sync loop uses it.
type quarantine struct {
	// The NetworkPolicies, ClusterNetworkPolicies and Services of the
	// last successful sync, as synced (a held object's accepted version,
	// not its refused one), by key. Only a refused batch or a held object
	// reads them: a sync keeps the lists (never changed in place) and the
	// tables are made when first needed, so an event does not cost every
	// policy and Service of the cluster.
	lastGood acceptedLists
	held     map[objKey]heldObject
}

// acceptedLists are the lists of the last successful sync and, once made,
// their tables by key.
type acceptedLists struct {
	in       compose.Input
	policies map[objKey]*networkingv1.NetworkPolicy
	cnps     map[objKey]*cnpv1beta1.ClusterNetworkPolicy
	services map[objKey]*corev1.Service
	made     bool
}

// tables makes the tables of the accepted lists, once.
func (a *acceptedLists) tables() *acceptedLists {
	if a.made {
		return a
	}
	a.policies = byKey(a.in.NetworkPolicies.All(), policyKey)
	a.cnps = byKey(a.in.ClusterNetworkPolicies, cnpKey)
	a.services = byKey(a.in.Services, serviceKey)
	a.made = true
	return a
}

func byKey[T any](objs []T, key func(T) objKey) map[objKey]T {
	m := make(map[objKey]T, len(objs))
	for _, o := range objs {
		m[key(o)] = o
	}
	return m
}

// apply returns in with every held object replaced by its accepted version
// (or left out), after releasing held objects that changed or are gone.
func (q *quarantine) apply(in compose.Input) compose.Input {
	if len(q.held) == 0 {
		return in
	}
	seen := map[objKey]bool{}
	release := func(k objKey, obj any) bool {
		h, ok := q.held[k]
		if !ok {
			return true
		}
		seen[k] = true
		if h.obj != obj && !sameContent(h.obj, obj) {
			delete(q.held, k) // changed: try the new version
			return true
		}
		return false
	}
	for _, np := range in.NetworkPolicies.All() {
		release(policyKey(np), np)
	}
	for _, p := range in.ClusterNetworkPolicies {
		release(cnpKey(p), p)
	}
	for _, s := range in.Services {
		release(serviceKey(s), s)
	}
	for k := range q.held {
		if !seen[k] {
			delete(q.held, k) // deleted
		}
	}
	return q.revert(in, func(k objKey) bool { _, ok := q.held[k]; return ok })
}

// revert returns in with the objects back(k) names replaced by their
// accepted versions, or left out when there is none.
func (q *quarantine) revert(in compose.Input, back func(objKey) bool) compose.Input {
	out, a := in, q.lastGood.tables()
	out.NetworkPolicies = in.NetworkPolicies.Update(revertList(in.NetworkPolicies.All(), policyKey, a.policies, back))
	out.ClusterNetworkPolicies = revertList(in.ClusterNetworkPolicies, cnpKey, a.cnps, back)
	out.Services = revertList(in.Services, serviceKey, a.services, back)
	return out
}

// revertList is revert for one kind: objs with those back(k) names
// replaced by their accepted versions, or left out when there is none.
func revertList[T any](objs []T, key func(T) objKey, accepted map[objKey]T, back func(objKey) bool) []T {
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		k := key(o)
		if !back(k) {
			out = append(out, o)
		} else if old, ok := accepted[k]; ok {
			out = append(out, old)
		}
	}
	return out
}

// suspects are the objects of in that the last successful sync did not
// have in this very version, in a stable order.
func (q *quarantine) suspects(in compose.Input) []objKey {
	var out []objKey
	a := q.lastGood.tables()
	for _, np := range in.NetworkPolicies.All() {
		if k := policyKey(np); a.policies[k] != np {
			out = append(out, k)
		}
	}
	for _, p := range in.ClusterNetworkPolicies {
		if k := cnpKey(p); a.cnps[k] != p {
			out = append(out, k)
		}
	}
	for _, s := range in.Services {
		if k := serviceKey(s); a.services[k] != s {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b objKey) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// accepted records the input of a successful sync.
func (q *quarantine) accepted(in compose.Input) {
	q.lastGood = acceptedLists{in: in}
}

// problems describes the held objects for Events and logs.
func (q *quarantine) problems() []problem.Problem {
	out := make([]problem.Problem, 0, len(q.held))
	for k, h := range q.held {
		api := problem.CoreV1
		switch k.kind {
		case "NetworkPolicy":
			api = problem.NetworkingV1
		case cnpKind:
			api = cnpv1beta1.GroupVersion.String()
		}
		what := "left out of the table (it was never enforced)"
		if h.kept {
			what = "its last accepted version stays enforced"
		}
		out = append(out, problem.Problem{
			Object: problem.Object{APIVersion: api, Kind: k.kind, Namespace: k.namespace, Name: k.name},
			Reason: "the kernel refuses the table with this object; " + what + " until it changes: " + h.reason,
		})
	}
	slices.SortFunc(out, func(a, b problem.Problem) int { return strings.Compare(a.Object.String(), b.Object.String()) })
	return out
}

// checker is the part of engine.Engine the search needs.
type checker interface {
	Check(ctx context.Context, d *engine.Desired) error
}

// isolation is the outcome of a search.
type isolation struct {
	in     compose.Input // what was synced: the refused objects reverted
	res    compose.Result
	st     engine.Stats
	bad    map[objKey]string // refused objects and the kernel's error for each
	checks int
}

// isolate is called when the kernel refused the sync of in (held objects
// already reverted). It finds the suspects the kernel refuses with check-only
// batches, then syncs in without them. It returns syncErr, extended, when
// the suspects do not explain the refusal.
func (s *syncer) isolate(ctx context.Context, in compose.Input, syncErr error) (*isolation, error) {
	chk, ok := s.eng.(checker)
	if !ok {
		return nil, syncErr
	}
	sus := s.q.suspects(in)
	if len(sus) == 0 {
		return nil, syncErr
	}
	isSuspect := make(map[objKey]bool, len(sus))
	for _, k := range sus {
		isSuspect[k] = true
	}
	iso := &isolation{bad: map[objKey]string{}}
	// The search compiles with a Builder of its own: the sync's Builder
	// keeps following the real state, so the next event stays cheap.
	var b compose.Builder
	include := map[objKey]bool{}
	try := func() error {
		iso.checks++
		s.m.checks.Inc()
		r := s.compile(&b, s.q.revert(in, func(k objKey) bool { return isSuspect[k] && !include[k] }))
		return chk.Check(ctx, r.Desired)
	}
	if err := try(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w (the kernel also refuses the table without the %d new or changed NetworkPolicies, ClusterNetworkPolicies and Services: %v)", syncErr, len(sus), err)
	}
	// Group testing by halves: a group is added to what is included; if
	// the kernel refuses, it is split. A group known to be refused (its
	// sibling was accepted whole) skips its own check. Cost: about
	// 2·k·log2(n) checks for k refused objects among n suspects.
	var search func(group []objKey, knownErr error) (allGood bool, err error)
	search = func(group []objKey, knownErr error) (bool, error) {
		refused := knownErr
		if refused == nil {
			for _, k := range group {
				include[k] = true
			}
			err := try()
			if err == nil {
				return true, nil
			}
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			for _, k := range group {
				delete(include, k)
			}
			refused = err
		}
		if len(group) == 1 {
			iso.bad[group[0]] = refused.Error()
			return false, nil
		}
		mid := len(group) / 2
		leftGood, err := search(group[:mid], nil)
		if err != nil {
			return false, err
		}
		var rightKnown error
		if leftGood {
			rightKnown = refused
		}
		_, err = search(group[mid:], rightKnown)
		return false, err
	}
	if _, err := search(sus, syncErr); err != nil {
		return nil, err
	}
	iso.in = s.q.revert(in, func(k objKey) bool { _, bad := iso.bad[k]; return bad })
	iso.res = s.compile(&s.build, iso.in)
	st, err := s.eng.Sync(ctx, iso.res.Desired)
	if err != nil {
		return nil, fmt.Errorf("%w (and again without %s: %w)", syncErr, keyList(iso.bad), err)
	}
	iso.st = st
	for k, reason := range iso.bad {
		var obj any
		var kept bool
		switch k.kind {
		case "NetworkPolicy":
			obj, kept = findPolicy(in, k), s.q.lastGood.tables().policies[k] != nil
		case cnpKind:
			obj, kept = findCNP(in, k), s.q.lastGood.tables().cnps[k] != nil
		case "Service":
			obj, kept = findService(in, k), s.q.lastGood.tables().services[k] != nil
		}
		if s.q.held == nil {
			s.q.held = map[objKey]heldObject{}
		}
		s.q.held[k] = heldObject{obj: obj, reason: trimSyncPrefix(reason), kept: kept}
	}
	return iso, nil
}

func findPolicy(in compose.Input, k objKey) *networkingv1.NetworkPolicy {
	for _, np := range in.NetworkPolicies.All() {
		if policyKey(np) == k {
			return np
		}
	}
	return nil
}

func findCNP(in compose.Input, k objKey) *cnpv1beta1.ClusterNetworkPolicy {
	for _, p := range in.ClusterNetworkPolicies {
		if cnpKey(p) == k {
			return p
		}
	}
	return nil
}

func findService(in compose.Input, k objKey) *corev1.Service {
	for _, s := range in.Services {
		if serviceKey(s) == k {
			return s
		}
	}
	return nil
}

func keyList(m map[objKey]string) string {
	var names []string
	for k := range m {
		names = append(names, k.String())
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// trimSyncPrefix keeps the part of an engine error that names the object
// the kernel refused.
func trimSyncPrefix(msg string) string {
	for _, p := range []string{"check table inet nftguard: ", "sync table inet nftguard: "} {
		msg = strings.ReplaceAll(msg, p, "")
	}
	return msg
}
