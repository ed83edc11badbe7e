package problemevents

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nftguard/nftguard/peerslice"
	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/problem"
)

// ReasonCompileFailed is the reason of the Warning Event about an object
// left out of the table.
const ReasonCompileFailed = "NftguardCompileFailed"

// ReasonQuarantined marks an object the kernel refuses (package quarantine).
const ReasonQuarantined = "NftguardQuarantined"

// ReasonOverBudget marks a NetworkPolicy enforced in its fail-closed form
// because it is over its budget on the reporting node (package budget).
const ReasonOverBudget = "NftguardOverBudget"

// ReasonNotFullyApplied marks a valid object that does not take full effect
// yet, such as an egress Service without a load-balancer address.
const ReasonNotFullyApplied = "NftguardNotFullyApplied"

// Values of the kind label of the errors counter the Reporter is given
// (nftguard_errors_total): what it counts there.
const (
	ErrorKindEvent         = "event"          // a Kubernetes Event could not be created
	ErrorKindInvalidObject = "invalid_object" // an object was newly found uncompilable
	ErrorKindQuarantined   = "quarantined"    // an object was newly held back because the kernel refuses it
	ErrorKindOverBudget    = "over_budget"    // a NetworkPolicy newly failed closed because it is over budget
)

// DefaultReporters is how many nodes report a problem that every node
// finds alike: more than one, so that one node whose agent is down or late
// does not hide it; few, so that the cluster's size does not multiply a
// tenant's mistake.
const DefaultReporters = 3

// Values of the result label of nftguard_events_total.
const (
	eventCreated = "created" // a new Event was written
	eventExists  = "exists"  // another node (or an earlier run) wrote it first
)

// Reporter turns compile problems into Kubernetes Warning Events, once
// per problem in the cluster, not once per node:
//
//   - An Event's name is derived from the object (with its UID), the reason
//     and the message, so every node that reports one problem writes the
//     same Event: the first create succeeds, the others are refused with
//     AlreadyExists, which is success. A changed problem (the object
//     rewritten with another bad value) is a new Event; one that comes back
//     unchanged while its Event still exists is not written again (no count
//     updates: an Event's count would be a write per node).
//   - Only a few nodes report a problem that every node finds alike (an
//     invalid object): of the nodes that host a pod of the object's
//     namespace, where the object would take effect (all Nodes when none
//     does, or for a cluster-scoped object), the reporters nodes ranking
//     highest for that object by rendezvous hashing. Every agent computes
//     the same ranking from its caches, without talking to the others.
//     Problems only the compiling node can find (its own pods; objects its
//     kernel refuses) are reported by that node, in an Event whose name
//     includes the node: at most one per node where the object takes
//     effect.
//
// client-go's recorder and its EventCorrelator are not used: they aggregate
// and rate-limit the Events of one process, and name Events by time, so
// they cannot stop 5,000 processes from writing one problem 5,000 times.
//
// A problem is reported when it appears (or changes), not on every sync.
// Events are sent by one goroutine so an unreachable API server never
// delays a sync.
type Reporter struct {
	client kubernetes.Interface
	node   string
	log    *slog.Logger
	// events counts the Events sent, by result; errors is the
	// process's errors counter, by kind.
	events, errors *prometheus.CounterVec
	// uidOf finds the object's UID in the informer caches ("" if gone).
	uidOf func(problem.Object) types.UID

	mu sync.Mutex
	// seen are the current problems, logged and counted once each;
	// queued those whose Event this node sent (or will send).
	seen, queued map[string]bool
	// passed are the current problems another node reports, with the
	// voters they were ranked among: decided again when those change.
	passed map[string]*voters
	elect  electorate
	q      chan queuedEvent
}

type queuedEvent struct {
	key string
	ev  *corev1.Event
}

// Config is what a Reporter needs.
type Config struct {
	// Client writes the Events.
	Client kubernetes.Interface
	// Node is the reporting node's name.
	Node string
	// Reporters is how many nodes report a problem every node finds
	// alike; zero means DefaultReporters.
	Reporters int
	// Registerer is where nftguard_events_total is registered.
	Registerer prometheus.Registerer
	// Errors is the process's errors counter, with one label, kind: the
	// Reporter counts the ErrorKind values on it.
	Errors *prometheus.CounterVec
	Logger *slog.Logger
	// UIDOf finds an object's UID (in the informer caches; "" if gone).
	UIDOf func(problem.Object) types.UID
}

// New is a Reporter; its Events are sent while Run runs.
func New(cfg Config) (*Reporter, error) {
	if cfg.Reporters <= 0 {
		cfg.Reporters = DefaultReporters
	}
	events := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nftguard_events_total",
		Help: "Warning Events this node sent, by result: created, or exists (another node wrote the same problem's Event first).",
	}, []string{"result"})
	if err := cfg.Registerer.Register(events); err != nil {
		return nil, fmt.Errorf("event metrics: %w", err)
	}
	// Exported from the start, so alerts on rate() see zeros.
	for _, r := range []string{eventCreated, eventExists} {
		events.WithLabelValues(r)
	}
	return &Reporter{client: cfg.Client, node: cfg.Node, log: cfg.Logger, uidOf: cfg.UIDOf,
		events: events, errors: cfg.Errors,
		seen: map[string]bool{}, queued: map[string]bool{}, passed: map[string]*voters{},
		elect: electorate{node: cfg.Node, k: cfg.Reporters},
		q:     make(chan queuedEvent, 256)}, nil
}

// Cluster is what the reporters of a problem are chosen from: the pods and
// Nodes of the compile that found it.
type Cluster struct {
	Pods  *podset.Set
	Nodes []*corev1.Node
}

// Report is called after every compile with all current problems, and the
// objects held back because the kernel refuses them.
//
// overBudget are NetworkPolicies over their budget on this node: whether
// one is depends on the node's own pods, so every node that finds it
// reports it, but the message does not name the node, so all of them
// write one Event.
func (r *Reporter) Report(problems, warnings, quarantined, overBudget []problem.Problem, c Cluster) {
	current := map[string]bool{}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.elect.begin(c)
	all := append(append(append(append([]problem.Problem{}, problems...), quarantined...), warnings...), overBudget...)
	for i, p := range all {
		over := i >= len(all)-len(overBudget)
		// Problems are objects left out of the table; quarantined objects
		// are held back (package quarantine); warnings are valid objects
		// that do not take full effect yet (an egress Service without a
		// load-balancer address, a pod another Service owns).
		skipped := i < len(problems)+len(quarantined)
		held := skipped && i >= len(problems)
		ref := p.Object
		if ref.Name == "" || ref.APIVersion == "" {
			continue // an Event needs an object to be about
		}
		uid := r.uidOf(ref)
		key := fmt.Sprintf("%s|%s|%s|%s|%s", ref.Kind, ref.Namespace, ref.Name, uid, p.Error())
		current[key] = true
		// A Pod's problems are about this node's pods (the policy
		// compiler reports local pods only); a quarantine is this node's
		// kernel's answer: this node reports them, in an Event of its
		// own. Other problems every node finds alike.
		local := p.Local || held || ref.Kind == "Pod" || over
		reason := ReasonCompileFailed
		switch {
		case over:
			reason = ReasonOverBudget
		case held:
			reason = ReasonQuarantined
		case !skipped:
			reason = ReasonNotFullyApplied
		}
		if !r.seen[key] {
			// Every node logs and counts what it finds; only the
			// Event is written once for the cluster.
			r.seen[key] = true
			switch reason {
			case ReasonQuarantined:
				r.errors.WithLabelValues(ErrorKindQuarantined).Inc()
				r.log.Warn("object quarantined", "kind", ref.Kind, "namespace", ref.Namespace, "name", ref.Name, "problem", p.Error())
			case ReasonOverBudget:
				r.errors.WithLabelValues(ErrorKindOverBudget).Inc()
				r.log.Warn("object over budget: enforced in its fail-closed form", "kind", ref.Kind, "namespace", ref.Namespace, "name", ref.Name, "problem", p.Error())
			case ReasonCompileFailed:
				r.errors.WithLabelValues(ErrorKindInvalidObject).Inc()
				r.log.Warn("object left out of the table", "kind", ref.Kind, "namespace", ref.Namespace, "name", ref.Name, "problem", p.Error())
			default:
				r.log.Warn("object does not take full effect", "kind", ref.Kind, "namespace", ref.Namespace, "name", ref.Name, "warning", p.Error())
			}
		}
		if r.queued[key] {
			continue
		}
		if !local {
			v := r.elect.voters(ref)
			if r.passed[key] == v {
				continue
			}
			if !r.elect.mine(ref, v) {
				r.passed[key] = v
				continue
			}
			delete(r.passed, key)
		}
		select {
		case r.q <- queuedEvent{key, r.event(ref, uid, reason, p.Error(), local && !over)}:
			r.queued[key] = true
		default:
			// Queue full (API server down during a storm): a later
			// sync that still has the problem sends it.
		}
	}
	// A fixed (or deleted) object may break again later: report it then.
	for _, m := range []map[string]bool{r.seen, r.queued} {
		for k := range m {
			if !current[k] {
				delete(m, k)
			}
		}
	}
	for k := range r.passed {
		if !current[k] {
			delete(r.passed, k)
		}
	}
	r.elect.end()
}

// event is the Event about one problem; a local one is this node's own
// (its name says which node found it).
func (r *Reporter) event(ref problem.Object, uid types.UID, reason, msg string, local bool) *corev1.Event {
	now := metav1.Now()
	// Events are namespaced; those about cluster-scoped objects (a
	// ClusterNetworkPolicy, a Node) go to "default", where client-go's
	// recorder puts them too (the ClusterRole's events/create is
	// cluster-wide).
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	msg = truncate(msg, 1000)
	by := ""
	if local {
		by = r.node
	}
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: eventName(ref, uid, reason, msg, by), Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: ref.Kind, APIVersion: ref.APIVersion,
			Namespace: ref.Namespace, Name: ref.Name, UID: uid},
		Reason:              reason,
		Message:             msg,
		Type:                corev1.EventTypeWarning,
		Source:              corev1.EventSource{Component: "nftguard", Host: r.node},
		ReportingController: "nftguard",
		ReportingInstance:   "nftguard-" + r.node,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
	}
}

// eventName is the same on every node for one problem: the object's name
// (as much of it as is a DNS label) and a hash of everything the Event
// says, so that a second reporter's create is refused as AlreadyExists.
// node is set for a problem only that node finds (and reports).
func eventName(ref problem.Object, uid types.UID, reason, msg, node string) string {
	h := sha256.New()
	for _, s := range []string{ref.APIVersion, ref.Kind, ref.Namespace, ref.Name, string(uid), reason, msg, node} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	prefix := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '-'
	}, ref.Name)
	if len(prefix) > 200 {
		prefix = prefix[:200]
	}
	prefix = strings.Trim(prefix, "-")
	if prefix == "" {
		prefix = "nftguard"
	}
	return prefix + "." + hex.EncodeToString(h.Sum(nil)[:8])
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// Run sends queued events until ctx is done.
func (r *Reporter) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case qe := <-r.q:
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := r.client.CoreV1().Events(qe.ev.Namespace).Create(cctx, qe.ev, metav1.CreateOptions{})
			cancel()
			switch {
			case err == nil:
				r.events.WithLabelValues(eventCreated).Inc()
			case apierrors.IsAlreadyExists(err):
				// Another reporter wrote this very problem: done.
				r.events.WithLabelValues(eventExists).Inc()
			case ctx.Err() == nil:
				r.errors.WithLabelValues(ErrorKindEvent).Inc()
				r.log.Error("create event", "namespace", qe.ev.Namespace, "object", qe.ev.InvolvedObject.Name, "err", err)
				r.mu.Lock()
				delete(r.queued, qe.key) // retried at the next sync that still has the problem
				r.mu.Unlock()
			}
		}
	}
}

// electorate chooses the nodes that report a problem every node finds
// alike. The voters of a namespace are kept while its pods' Group is
// unchanged, so a sync costs the namespaces whose pods changed, not the
// cluster.
type electorate struct {
	node string
	k    int

	pods  *podset.Set
	nodes []*corev1.Node
	byNS  map[string]*voters // the last report's, by namespace
	used  map[string]*voters // this report's
	allOf []*corev1.Node     // the Node list all was made from
	all   *voters
}

// voters are the names of the nodes that may report an object's problems,
// sorted and distinct.
type voters struct {
	group *podset.Group // the pods they were read from; nil for all Nodes
	names []string
}

func (e *electorate) begin(c Cluster) {
	e.pods, e.nodes = c.Pods, c.Nodes
	e.used = map[string]*voters{}
	if !sameList(e.allOf, c.Nodes) {
		e.all, e.allOf = nil, c.Nodes
	}
}

func (e *electorate) end() { e.byNS, e.used, e.pods, e.nodes = e.used, nil, nil, nil }

func sameList(a, b []*corev1.Node) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// voters are the nodes hosting a pod of ref's namespace, or every Node when
// no pod is there or ref is cluster-scoped.
func (e *electorate) voters(ref problem.Object) *voters {
	if ns := ref.Namespace; ns != "" {
		if v := e.used[ns]; v != nil {
			return v
		}
		if g := e.group(ns); g != nil {
			v := e.byNS[ns]
			if v == nil || v.group != g {
				v = &voters{group: g, names: podNodes(g)}
			}
			if len(v.names) > 0 {
				e.used[ns] = v
				return v
			}
		}
	}
	if e.all == nil {
		names := []string{e.node} // this node reports even before its Node is in the cache
		for _, n := range e.nodes {
			names = append(names, n.Name)
		}
		slices.Sort(names)
		e.all = &voters{names: slices.Compact(names)}
	}
	return e.all
}

func (e *electorate) group(ns string) *podset.Group {
	gs := e.pods.Groups()
	i, ok := slices.BinarySearchFunc(gs, ns, func(g *podset.Group, ns string) int { return strings.Compare(g.Namespace, ns) })
	if !ok {
		return nil
	}
	return gs[i]
}

// podNodes are the nodes of the namespace's pods a peer record is
// published for (peerslice.Published): an agent that reads PeerSlices knows
// only those of other nodes, so every agent, whatever its peer source,
// finds the same voters.
func podNodes(g *podset.Group) []string {
	var names []string
	for _, p := range g.Items {
		if p.NodeName != "" && peerslice.Published(p) {
			names = append(names, p.NodeName)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// mine reports whether this node is among the k voters that rank highest
// for ref (rendezvous hashing: each voter's rank is a hash of its name and
// the object, so every agent finds the same reporters, and a voter joining
// or leaving changes the reporters of few objects).
func (e *electorate) mine(ref problem.Object, v *voters) bool {
	if _, ok := slices.BinarySearch(v.names, e.node); !ok {
		return false // no pod of the namespace here: not where it takes effect
	}
	obj := fnvString(fnvOffset, ref.Kind+"\x00"+ref.Namespace+"\x00"+ref.Name+"\x00")
	own := rank(obj, e.node)
	above := 0
	for _, n := range v.names {
		if n == e.node {
			continue
		}
		if s := rank(obj, n); s > own || s == own && n < e.node {
			above++
			if above >= e.k {
				return false
			}
		}
	}
	return true
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// rank is a node's score for an object, whose FNV-1a state obj is: the
// state continued with the node's name, then mixed (splitmix64's finalizer)
// so that names differing in their last byte do not rank side by side.
func rank(obj uint64, node string) uint64 {
	h := fnvString(obj, node)
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}
