package quarantine

import (
	"errors"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/problem"
)

// The kinds of object a Key names: the only ones that can be held.
const (
	KindNetworkPolicy        = "NetworkPolicy"
	KindClusterNetworkPolicy = "ClusterNetworkPolicy"
	KindService              = "Service"
)

// Key names one API object.
type Key struct{ Kind, Namespace, Name string }

func (k Key) String() string { return k.Kind + " " + k.Namespace + "/" + k.Name }

func policyKey(np *networkingv1.NetworkPolicy) Key {
	return Key{KindNetworkPolicy, np.Namespace, np.Name}
}

func serviceKey(s *corev1.Service) Key { return Key{KindService, s.Namespace, s.Name} }

func cnpKey(p *cnpv1beta1.ClusterNetworkPolicy) Key { return Key{KindClusterNetworkPolicy, "", p.Name} }

// held is one quarantined object.
type held struct {
	obj    any    // the version the kernel refused
	reason string // the kernel's error when the object was checked
	kept   bool   // its last accepted version stays in the table
}

// Quarantine is the sync loop's memory of what the kernel accepted and
// what it refused. One goroutine uses it.
type Quarantine struct {
	// unchanged says whether an object is the held version in content
	// (the caller's notion: its informers ignore a new resource version
	// alone).
	unchanged func(held, current any) bool
	// The NetworkPolicies, ClusterNetworkPolicies and Services of the
	// last successful sync, as synced (a held object's accepted version,
	// not its refused one), by key. Only a refused batch or a held object
	// reads them: a sync keeps the lists (never changed in place) and the
	// tables are made when first needed, so an event does not cost every
	// policy and Service of the cluster.
	lastGood acceptedLists
	held     map[Key]held
}

// New returns an empty Quarantine. unchanged reports whether the current
// version of a held object has the content of the held one: a held object
// is tried again only when it changed. (The zero Quarantine takes any
// other object than the held one as a change.)
func New(unchanged func(held, current any) bool) *Quarantine {
	return &Quarantine{unchanged: unchanged}
}

// acceptedLists are the lists of the last successful sync and, once made,
// their tables by key.
type acceptedLists struct {
	in       compose.Input
	policies map[Key]*networkingv1.NetworkPolicy
	cnps     map[Key]*cnpv1beta1.ClusterNetworkPolicy
	services map[Key]*corev1.Service
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

func byKey[T any](objs []T, key func(T) Key) map[Key]T {
	m := make(map[Key]T, len(objs))
	for _, o := range objs {
		m[key(o)] = o
	}
	return m
}

// Apply returns in with every held object replaced by its accepted version
// (or left out), after releasing held objects that changed or are gone.
func (q *Quarantine) Apply(in compose.Input) compose.Input {
	if len(q.held) == 0 {
		return in
	}
	seen := map[Key]bool{}
	release := func(k Key, obj any) {
		h, ok := q.held[k]
		if !ok {
			return
		}
		seen[k] = true
		if h.obj != obj && (q.unchanged == nil || !q.unchanged(h.obj, obj)) {
			delete(q.held, k) // changed: try the new version
		}
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
	return q.revert(in, func(k Key) bool { _, ok := q.held[k]; return ok })
}

// revert returns in with the objects back(k) names replaced by their
// accepted versions, or left out when there is none.
func (q *Quarantine) revert(in compose.Input, back func(Key) bool) compose.Input {
	out, a := in, q.lastGood.tables()
	out.NetworkPolicies = in.NetworkPolicies.Update(revertList(in.NetworkPolicies.All(), policyKey, a.policies, back))
	out.ClusterNetworkPolicies = revertList(in.ClusterNetworkPolicies, cnpKey, a.cnps, back)
	out.Services = revertList(in.Services, serviceKey, a.services, back)
	return out
}

// revertList is revert for one kind: objs with those back(k) names
// replaced by their accepted versions, or left out when there is none.
func revertList[T any](objs []T, key func(T) Key, accepted map[Key]T, back func(Key) bool) []T {
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
func (q *Quarantine) suspects(in compose.Input) []Key {
	var out []Key
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
	slices.SortFunc(out, func(a, b Key) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// Accepted records the input of a successful sync.
func (q *Quarantine) Accepted(in compose.Input) {
	q.lastGood = acceptedLists{in: in}
}

// Hold records the objects f found refused, once the table without them
// is in force. in is the input f was searched on.
func (q *Quarantine) Hold(in compose.Input, f *Found) {
	a := q.lastGood.tables()
	for k, err := range f.Refused {
		var obj any
		var kept bool
		switch k.Kind {
		case KindNetworkPolicy:
			obj, kept = find(in.NetworkPolicies.All(), policyKey, k), a.policies[k] != nil
		case KindClusterNetworkPolicy:
			obj, kept = find(in.ClusterNetworkPolicies, cnpKey, k), a.cnps[k] != nil
		case KindService:
			obj, kept = find(in.Services, serviceKey, k), a.services[k] != nil
		}
		if q.held == nil {
			q.held = map[Key]held{}
		}
		q.held[k] = held{obj: obj, reason: reason(err), kept: kept}
	}
}

// find returns the object of objs that k names.
func find[T any](objs []T, key func(T) Key, k Key) any {
	for _, o := range objs {
		if key(o) == k {
			return o
		}
	}
	return nil
}

// reason is the part of a refusal that names the object the kernel
// refused: the engine's Error, without the table the engine's wrapping
// names (every sync is of the one table). Any other error is given whole.
func reason(err error) string {
	var ke *engine.Error
	if errors.As(err, &ke) {
		return ke.Error()
	}
	return err.Error()
}

// Len is the number of held objects.
func (q *Quarantine) Len() int { return len(q.held) }

// Held names the held objects, sorted.
func (q *Quarantine) Held() []Key {
	out := make([]Key, 0, len(q.held))
	for k := range q.held {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b Key) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// Problems describes the held objects for Events and logs.
func (q *Quarantine) Problems() []problem.Problem {
	out := make([]problem.Problem, 0, len(q.held))
	for k, h := range q.held {
		api := problem.CoreV1
		switch k.Kind {
		case KindNetworkPolicy:
			api = problem.NetworkingV1
		case KindClusterNetworkPolicy:
			api = cnpv1beta1.GroupVersion.String()
		}
		what := "left out of the table (it was never enforced)"
		if h.kept {
			what = "its last accepted version stays enforced"
		}
		out = append(out, problem.Problem{
			Object: problem.Object{APIVersion: api, Kind: k.Kind, Namespace: k.Namespace, Name: k.Name},
			Reason: "the kernel refuses the table with this object; " + what + " until it changes: " + h.reason,
		})
	}
	slices.SortFunc(out, func(a, b problem.Problem) int { return strings.Compare(a.Object.String(), b.Object.String()) })
	return out
}
