package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/nftguard/nftguard/deniedflow"
	"github.com/nftguard/nftguard/peerslice"
	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/served"
)

// Where the pods of other nodes come from. A peer selector may name any pod
// of the cluster, so the agent must know them all; it need not watch them
// all. With PeerSourceSlices it watches its own node's pods in full (field
// selector spec.nodeName: the pods it guards, with everything the pod guards,
// egress and Events read) and learns every other pod from the compact
// records nftguard's controller publishes as PeerSlices (package peerslice):
// the same addresses, node, labels and referenced named ports, in a
// fraction of the bytes the API server sends for a Pod watch.
//
//   - The compilers get one podset.Set either way: the node's pods and the
//     records of other nodes' pods, by namespace and name. A name present
//     twice (a record being moved between slices, a stale record of a pod
//     now on this node) counts once: the node's own pod wins, else the
//     record of the slice with the lowest name.
//   - The records of pods the controller does not publish (no address,
//     finished, host network) are missing, and nothing compiled depends on
//     them: the compilers never select such a pod as a remote peer, and the
//     budget counts only what they can select. A test compiles both ways
//     and compares the tables byte for byte.
//   - Records carry no UID: Events about a pod are about this node's pods,
//     which are complete.
//   - The records are complete once a controller has published them (the
//     Lease annotation annotationPublished). PeerSourceAuto reads slices
//     only then, and only when the Lease is fresh. Having chosen Pods, it
//     asks again every CNPCheckInterval and, once the slices are
//     published, stops with ErrPeerSourceChanged so that its caller
//     starts it again reading slices (a controller deployed with the
//     agents publishes after they start). Reading slices, it goes back
//     to Pods the same way only when PeerSlices are no longer served.
//   - While the controller's Lease is not renewed, the records are stale:
//     they stay enforced as they are (dropping them could lift a
//     ClusterNetworkPolicy Deny on those peers), a metric and the
//     readiness detail say so, and readiness stays true (the table is
//     still the best this node can do).

// PeerSource is where the pods of other nodes come from.
type PeerSource string

// The peer sources.
const (
	// PeerSourceAuto reads slices when, at start, the API server serves
	// them and the controller's Lease is fresh and says they are
	// published; else Pods.
	PeerSourceAuto PeerSource = "auto"
	// PeerSourcePods watches every Pod of the cluster.
	PeerSourcePods PeerSource = "pods"
	// PeerSourceSlices watches this node's Pods and every PeerSlice.
	PeerSourceSlices PeerSource = "slices"
)

// DefaultControllerLease is the Lease nftguard's controller holds.
var DefaultControllerLease = types.NamespacedName{Namespace: "kube-system", Name: "nftguard-controller"}

// DefaultControllerLeaseCheck is how often, in slices mode, the controller's
// Lease is read: one small GET per node and interval.
const DefaultControllerLeaseCheck = 10 * time.Second

// annotationPublished is set on the controller's Lease once a leader has
// published every namespace's records (peerslice.AnnotationPublished, once
// the controller's package defines it there).
const annotationPublished = peerslice.AnnotationPublished

// peerSliceKind labels PeerSlice changes in metrics.
const peerSliceKind = "PeerSlice"

// choosePeerSource resolves PeerSourceAuto at start; it returns the source
// and why it was chosen (logged once), and whether that is a problem:
// slices asked for but not served (the informer waits for them, so the
// caches never sync and the table of the previous run stays as it is).
func choosePeerSource(ctx context.Context, cfg *Config, disc discovery.DiscoveryInterface, getLease leaseGetter) (src PeerSource, why string, problem bool) {
	switch cfg.PeerSource {
	case PeerSourcePods:
		return cfg.PeerSource, "set by --peer-source", false
	case PeerSourceSlices:
		if why := slicesServed(disc); why != "" {
			return cfg.PeerSource, "set by --peer-source, but " + why + ": waiting for them", true
		}
		return cfg.PeerSource, "set by --peer-source", false
	}
	if why := slicesServed(disc); why != "" {
		return PeerSourcePods, why, false
	}
	l, err := getLease(ctx)
	if err != nil {
		return PeerSourcePods, fmt.Sprintf("controller lease %s: %v", cfg.ControllerLease, err), false
	}
	if exp := leaseExpiry(l); !cfg.clock.Now().Before(exp) {
		return PeerSourcePods, fmt.Sprintf("controller lease %s is not renewed (expired %s)", cfg.ControllerLease, exp.UTC().Format(time.RFC3339)), false
	}
	if _, ok := l.Annotations[annotationPublished]; !ok {
		return PeerSourcePods, fmt.Sprintf("controller lease %s has no %s annotation: the records are not complete yet", cfg.ControllerLease, annotationPublished), false
	}
	return PeerSourceSlices, fmt.Sprintf("PeerSlices are served and controller lease %s is fresh and published", cfg.ControllerLease), false
}

// slicesServed asks discovery whether PeerSlices are served: "" if they
// are, else why not.
func slicesServed(disc discovery.DiscoveryInterface) string {
	gv := peerslice.Group + "/" + peerslice.Version
	v, err := served.Version(disc, peerslice.Group, peerslice.Resource, peerslice.Version)
	switch {
	case err != nil:
		return fmt.Sprintf("discovery of %s failed: %v", gv, err)
	case v == "":
		return "PeerSlices (" + gv + ") are not served"
	}
	return ""
}

// ErrPeerSourceChanged is what Run returns when auto would now choose
// another source (see autoAgain): the agent has stopped with its table in
// force, and its caller starts it again (nftguard run re-executes itself),
// so that the new run reads that source from its first sync. Switching the
// caches of a running agent would have to hand every reader of the pod
// cache over at once; a restart is the path every upgrade already takes,
// and leaves no window (the next run replaces the table only once its
// caches are complete).
var ErrPeerSourceChanged = errors.New("the peer source changed: restart to read it")

// watchPeerSource asks choose every interval until it names another
// source than from, and reports whether it did (false: ctx ended first).
func watchPeerSource(ctx context.Context, clk clock.WithTicker, interval time.Duration, from PeerSource, choose func(context.Context) (PeerSource, string), log *slog.Logger) bool {
	t := clk.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C():
		}
		if src, why := choose(ctx); src != from {
			log.Info("peer source changes: restarting to read "+string(src)+" (the table stays in force)", "from", string(from), "reason", why)
			return true
		}
	}
}

// autoAgain is auto's choice while the agent runs. Reading Pods, it is
// choosePeerSource's. Reading slices, only a definite answer that they are
// no longer served (their CRD removed, every record gone with it) moves
// it back to Pods: a controller that is down leaves the records stale,
// not gone, and they stay enforced.
func autoAgain(cfg *Config, current PeerSource, disc discovery.DiscoveryInterface, getLease leaseGetter) func(context.Context) (PeerSource, string) {
	if current == PeerSourcePods {
		return func(ctx context.Context) (PeerSource, string) {
			src, why, _ := choosePeerSource(ctx, cfg, disc, getLease)
			return src, why
		}
	}
	return func(context.Context) (PeerSource, string) {
		v, err := served.Version(disc, peerslice.Group, peerslice.Resource, peerslice.Version)
		if err == nil && v == "" {
			return PeerSourcePods, "PeerSlices are no longer served"
		}
		return PeerSourceSlices, ""
	}
}

// leaseGetter reads the controller's Lease.
type leaseGetter func(ctx context.Context) (*coordinationv1.Lease, error)

// leaseExpiry is when a Lease stops being fresh: its renew time plus its
// duration; the zero time when it has neither.
func leaseExpiry(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
}

// leaseVerdict judges one read of the Lease at now: known is false when the
// read failed for another reason than the Lease missing (the API server
// down tells nothing about the controller); since is when the records
// became stale (the Lease's expiry, or now when it has none or is gone).
func leaseVerdict(l *coordinationv1.Lease, err error, now time.Time) (stale bool, since time.Time, known bool) {
	switch {
	case apierrors.IsNotFound(err):
		return true, now, true
	case err != nil:
		return false, time.Time{}, false
	}
	exp := leaseExpiry(l)
	if exp.IsZero() {
		return true, now, true
	}
	if now.Before(exp) {
		return false, time.Time{}, true
	}
	return true, exp, true
}

// watchControllerLease reads the Lease now and then every interval (on
// clk) until ctx is done, and reports whether the records are stale in the
// metric and the readiness detail. It never touches the records.
func watchControllerLease(ctx context.Context, clk clock.WithTicker, every time.Duration, lease types.NamespacedName, get leaseGetter, m *metrics, h *health, log *slog.Logger) {
	t := clk.NewTicker(every)
	defer t.Stop()
	var staleSince time.Time
	failing := false
	for {
		l, err := get(ctx)
		if ctx.Err() != nil {
			return
		}
		stale, since, known := leaseVerdict(l, err, clk.Now())
		switch {
		case !known:
			if !failing {
				log.Warn("cannot read the controller's lease; peer records judged as before", "lease", lease.String(), "err", err)
			}
			failing = true
		case stale && staleSince.IsZero():
			failing, staleSince = false, since
			m.peerRecordsStale.Set(1)
			h.peersStale(since)
			log.Warn("peer records stale: the controller's lease is not renewed; the last records stay enforced",
				"lease", lease.String(), "since", since.UTC().Format(time.RFC3339), "lease_found", err == nil)
		case !stale && !staleSince.IsZero():
			failing, staleSince = false, time.Time{}
			m.peerRecordsStale.Set(0)
			h.peersStale(time.Time{})
			log.Info("peer records fresh again: the controller's lease is renewed", "lease", lease.String())
		default:
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// remoteSlice is a PeerSlice as the slice informer keeps it: the records of
// other nodes' pods, as pod records the compilers read.
type remoteSlice struct {
	metav1.ObjectMeta // name, namespace and resource version only
	// pods are by name, one per name; this node's records are left out
	// (its pods are watched in full).
	pods []*podset.Pod
}

// newSliceInformer is the informer of every PeerSlice, whose store holds
// remoteSlices (see stripper.slice), indexed by namespace.
func newSliceInformer(dyn dynamic.Interface, strip *stripper, node string) (cache.SharedIndexInformer, error) {
	inf := dynamicinformer.NewFilteredDynamicInformer(dyn, peerslice.GroupVersionResource, metav1.NamespaceAll, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil).Informer()
	if err := inf.SetTransform(func(obj any) (any, error) { return strip.slice(obj, node) }); err != nil {
		return nil, fmt.Errorf("watch peerslices: %w", err)
	}
	return inf, nil
}

// slice is the slice informer's transform: a PeerSlice to its records of
// pods not on node, with their labels and named ports shared with equal
// pods' and their strings interned.
func (s *stripper) slice(obj any, node string) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil // tombstones
	}
	ps, err := peerslice.FromUnstructured(u)
	if err != nil {
		return nil, err
	}
	out := &remoteSlice{ObjectMeta: metav1.ObjectMeta{Name: ps.Name, Namespace: intern(ps.Namespace), ResourceVersion: ps.ResourceVersion}}
	out.pods = make([]*podset.Pod, 0, len(ps.Peers))
	for i := range ps.Peers {
		p := &ps.Peers[i]
		if p.Node == node {
			continue
		}
		rec := peerslice.ToPod(out.Namespace, p)
		rec.NodeName = intern(rec.NodeName)
		s.shareRecord(rec)
		out.pods = append(out.pods, rec)
	}
	// Stable: of two records of one name in a slice, the first counts.
	slices.SortStableFunc(out.pods, func(a, b *podset.Pod) int { return cmp.Compare(a.Name, b.Name) })
	out.pods = slices.CompactFunc(out.pods, func(a, b *podset.Pod) bool { return a.Name == b.Name })
	out.pods = slices.Clip(out.pods)
	return out, nil
}

// sameSlice tells whether two remoteSlices hold the same records.
func sameSlice(a, b *remoteSlice) bool {
	return a.Namespace == b.Namespace && a.Name == b.Name &&
		slices.EqualFunc(a.pods, b.pods, func(p, q *podset.Pod) bool { return p.Same(q) })
}

// mergePods are the pods of the pod informer (local: *podset.Pod) and the
// records of the slice informer (remote: *remoteSlice), by namespace and
// name, one per name: a pod of the pod informer wins, else the record of
// the slice with the lowest name (the order every agent agrees on, so a
// record being moved reads the same everywhere).
func mergePods(local, remote []any) []*podset.Pod {
	if len(remote) == 0 {
		return sortedPods(local)
	}
	// Sorted once, at the end, with the records.
	pods := make([]*podset.Pod, 0, len(local))
	for _, o := range local {
		if p, ok := o.(*podset.Pod); ok {
			pods = append(pods, p)
		}
	}
	rs := make([]*remoteSlice, 0, len(remote))
	n := len(pods)
	for _, o := range remote {
		if s, ok := o.(*remoteSlice); ok {
			rs = append(rs, s)
			n += len(s.pods)
		}
	}
	slices.SortFunc(rs, func(a, b *remoteSlice) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	type key struct{ ns, name string }
	seen := make(map[key]bool, n)
	for _, p := range pods {
		seen[key{p.Namespace, p.Name}] = true
	}
	pods = slices.Grow(pods, n-len(pods))
	for _, s := range rs {
		for _, p := range s.pods {
			if k := (key{p.Namespace, p.Name}); !seen[k] {
				seen[k] = true
				pods = append(pods, p)
			}
		}
	}
	slices.SortFunc(pods, func(a, b *podset.Pod) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return pods
}

// peerAddrIndex indexes the slice informer's store by the addresses of its
// records, in deniedflow's form: the denied-packet log names other nodes'
// pods by them.
const peerAddrIndex = "nftguard.io/peer-address"

// indexPeerAddrs adds peerAddrIndex to the slice informer, before it
// starts.
func indexPeerAddrs(inf cache.SharedIndexInformer) error {
	err := inf.AddIndexers(cache.Indexers{peerAddrIndex: func(obj any) ([]string, error) {
		s, ok := obj.(*remoteSlice)
		if !ok {
			return nil, nil
		}
		var keys []string
		for _, p := range s.pods {
			keys = append(keys, deniedflow.PodAddrKeys(p)...)
		}
		slices.Sort(keys)
		return slices.Compact(keys), nil
	}})
	if err != nil {
		return fmt.Errorf("index peer records by address: %w", err)
	}
	return nil
}

// peerByAddr names the record ("namespace/name") of addr among the slices,
// the first by name when two hold it (as deniedflow names pods), or "".
func peerByAddr(idx cache.Indexer, addr netip.Addr) string {
	key := deniedflow.AddrKey(addr)
	objs, err := idx.ByIndex(peerAddrIndex, key)
	if err != nil {
		return ""
	}
	best := ""
	for _, o := range objs {
		s, ok := o.(*remoteSlice)
		if !ok {
			continue
		}
		for _, p := range s.pods {
			if name := p.Namespace + "/" + p.Name; (best == "" || name < best) && slices.Contains(deniedflow.PodAddrKeys(p), key) {
				best = name
			}
		}
	}
	return best
}
