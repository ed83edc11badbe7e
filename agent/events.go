package agent

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nftguard/nftguard/problem"
)

// Reason of the Warning events the agent creates.
const reasonCompileFailed = "NftguardCompileFailed"

// reasonQuarantined marks an object the kernel refuses (package quarantine).
const reasonQuarantined = "NftguardQuarantined"

// reasonNotFullyApplied marks a valid object that does not take full effect
// yet, such as an egress Service without a load-balancer address.
const reasonNotFullyApplied = "NftguardNotFullyApplied"

// eventRecorder turns compile problems into Kubernetes Warning events, once
// per object and message: a bad object is reported when it appears (or its
// problem changes), not on every sync. Events are sent by one goroutine so
// an unreachable API server never delays a sync.
type eventRecorder struct {
	client kubernetes.Interface
	node   string
	log    *slog.Logger
	m      *metrics
	// uidOf finds the object's UID in the informer caches ("" if gone).
	uidOf func(problem.Object) types.UID

	mu   sync.Mutex
	seen map[string]bool // problem keys reported (or queued) and still current
	q    chan queuedEvent
}

type queuedEvent struct {
	key string
	ev  *corev1.Event
}

func newEventRecorder(client kubernetes.Interface, node string, m *metrics, log *slog.Logger, uidOf func(problem.Object) types.UID) *eventRecorder {
	return &eventRecorder{client: client, node: node, m: m, log: log, uidOf: uidOf,
		seen: map[string]bool{}, q: make(chan queuedEvent, 256)}
}

// report is called after every compile with all current problems, and the
// objects held back because the kernel refuses them.
func (r *eventRecorder) report(problems, warnings, quarantined []problem.Problem) {
	current := map[string]bool{}
	r.mu.Lock()
	defer r.mu.Unlock()
	all := append(append(append([]problem.Problem{}, problems...), quarantined...), warnings...)
	for i, p := range all {
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
		if r.seen[key] {
			continue
		}
		r.seen[key] = true
		reason := reasonCompileFailed
		switch {
		case held:
			reason = reasonQuarantined
			r.m.errors.WithLabelValues(errorKindQuarantined).Inc()
			r.log.Warn("object quarantined", "kind", ref.Kind, "namespace", ref.Namespace, "name", ref.Name, "problem", p.Error())
		case skipped:
			r.m.errors.WithLabelValues(errorKindInvalidObject).Inc()
			r.log.Warn("object left out of the table", "kind", ref.Kind, "namespace", ref.Namespace, "name", ref.Name, "problem", p.Error())
		default:
			reason = reasonNotFullyApplied
			r.log.Warn("object does not take full effect", "kind", ref.Kind, "namespace", ref.Namespace, "name", ref.Name, "warning", p.Error())
		}
		select {
		case r.q <- queuedEvent{key, r.event(ref, uid, reason, p.Error())}:
		default:
			// Queue full (API server down during a storm): forget the
			// key so a later sync reports it again.
			delete(r.seen, key)
		}
	}
	// A fixed (or deleted) object may break again later: report it then.
	for k := range r.seen {
		if !current[k] {
			delete(r.seen, k)
		}
	}
}

func (r *eventRecorder) event(ref problem.Object, uid types.UID, reason, msg string) *corev1.Event {
	now := metav1.Now()
	// Events are namespaced; those about cluster-scoped objects (a
	// ClusterNetworkPolicy, a Node) go to "default", where client-go's
	// recorder puts them too (the ClusterRole's events/create is
	// cluster-wide).
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			// Unique per report; the dedupe above keeps the count low.
			Name:      fmt.Sprintf("%s.%x", ref.Name, time.Now().UnixNano()),
			Namespace: ns,
		},
		InvolvedObject: corev1.ObjectReference{Kind: ref.Kind, APIVersion: ref.APIVersion,
			Namespace: ref.Namespace, Name: ref.Name, UID: uid},
		Reason:              reason,
		Message:             truncate(msg, 1000),
		Type:                corev1.EventTypeWarning,
		Source:              corev1.EventSource{Component: "nftguard", Host: r.node},
		ReportingController: "nftguard",
		ReportingInstance:   "nftguard-" + r.node,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// run sends queued events until ctx is done.
func (r *eventRecorder) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case qe := <-r.q:
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := r.client.CoreV1().Events(qe.ev.Namespace).Create(cctx, qe.ev, metav1.CreateOptions{})
			cancel()
			if err != nil && ctx.Err() == nil {
				r.m.errors.WithLabelValues(errorKindEvent).Inc()
				r.log.Error("create event", "namespace", qe.ev.Namespace, "object", qe.ev.InvolvedObject.Name, "err", err)
				r.mu.Lock()
				delete(r.seen, qe.key) // retried at the next sync that still has the problem
				r.mu.Unlock()
			}
		}
	}
}
