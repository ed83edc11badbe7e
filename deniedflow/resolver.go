package deniedflow

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/labels"
	netlisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/explain"
	"github.com/nftguard/nftguard/flowlog"
	"github.com/nftguard/nftguard/podset"
)

// Resolver resolves records from the agent's informer caches: pods by
// address through the pod informer's address index (podindex.go), the
// isolating policies from the lister of the pod's namespace, and
// ClusterNetworkPolicy Deny rules by evaluating the flow on the input of
// the last sync (clusterDecider). It is a flowlog.Resolver and a
// flowlog.ClusterDenier.
type Resolver struct {
	pods     cache.Indexer // the pod informer's store of *podset.Pod, with the address index
	policies netlisters.NetworkPolicyLister
	cluster  clusterDecider
	// byIfindex maps the interface index of each guarded pod's interface
	// to the pod (namespace/name), as of the last sync.
	byIfindex atomic.Pointer[map[uint32]string]
	// peers names the pod of an address the pod informer does not hold;
	// nil: none.
	peers func(netip.Addr) string
}

// WithPeers makes r name an address that no pod of the pod informer holds
// through peers (an agent that watches its own node's pods only resolves
// other nodes' pods from their peer records), which returns
// "namespace/name" or "". It returns r; call it before r is used.
func (r *Resolver) WithPeers(peers func(netip.Addr) string) *Resolver {
	r.peers = peers
	return r
}

// NewResolver resolves from pods, the pod informer's store (records made
// by podset, indexed by IndexPodAddrs), and the NetworkPolicy lister.
// Until Synced is called it names no ClusterNetworkPolicy rule.
func NewResolver(pods cache.Indexer, policies netlisters.NetworkPolicyLister) *Resolver {
	return &Resolver{pods: pods, policies: policies}
}

// Synced records the input and result of a sync that succeeded: records
// are judged by the ClusterNetworkPolicies of the table in force, and a
// forged-source record is named by the pod whose interface it came by.
// The sync loop calls it; it costs a map of the node's guarded pods.
func (r *Resolver) Synced(in compose.Input, res compose.Result) {
	r.cluster.synced(in)
	byName := make(map[string]uint32, len(in.PodInterfaces))
	for _, ifc := range in.PodInterfaces {
		if ifc.Index > 0 {
			byName[ifc.Name] = uint32(ifc.Index)
		}
	}
	m := make(map[uint32]string, len(res.Guarded))
	for pod, name := range res.Guarded {
		if i, ok := byName[name]; ok {
			m[i] = pod
		}
	}
	r.byIfindex.Store(&m)
}

// PodByIfindex implements flowlog.InterfaceResolver.
func (r *Resolver) PodByIfindex(i uint32) string {
	if m := r.byIfindex.Load(); m != nil {
		return (*m)[i]
	}
	return ""
}

// ClusterDeny implements flowlog.ClusterDenier.
func (r *Resolver) ClusterDeny(rec *flowlog.Record) *flowlog.ClusterRule {
	return flowlog.ClusterDeny(r.cluster.get(), rec)
}

// PodByAddr implements flowlog.Resolver.
func (r *Resolver) PodByAddr(a netip.Addr) string {
	if name := podByAddr(r.pods, a); name != "" || r.peers == nil {
		return name
	}
	return r.peers(a)
}

// Isolating implements flowlog.Resolver.
func (r *Resolver) Isolating(pod string, d flowlog.Direction) []string {
	o, ok, err := r.pods.GetByKey(pod)
	if err != nil || !ok {
		return nil
	}
	p, ok := o.(*podset.Pod)
	if !ok {
		return nil
	}
	nps, err := r.policies.NetworkPolicies(p.Namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	return flowlog.IsolatingPolicies(nps, p.Labels, d)
}

// clusterDecider keeps the explain.Cluster that names the
// ClusterNetworkPolicy rule of a record (see flowlog.ClusterDeny). It is
// built from the input of the last successful sync, the input the table
// in force was compiled from, so a record is judged by the rules that
// dropped it; and it is built once per sync generation, lazily, when the
// first record after a sync needs it: a sync costs a pointer store, a
// record an evaluation over indexed objects, and a node with no
// ClusterNetworkPolicy nothing at all.
type clusterDecider struct {
	mu         sync.Mutex
	in         *compose.Input // of the last sync; nil before the first
	gen, built uint64
	c          *explain.Cluster
}

// synced records the input of a sync that succeeded (see Resolver.Synced).
func (d *clusterDecider) synced(in compose.Input) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.in = &in
	d.gen++
}

// get returns the cluster of the last sync, nil when it had no
// ClusterNetworkPolicy.
func (d *clusterDecider) get() *explain.Cluster {
	d.mu.Lock()
	in, gen, built, c := d.in, d.gen, d.built, d.c
	d.mu.Unlock()
	if in == nil || len(in.ClusterNetworkPolicies) == 0 {
		return nil
	}
	if built == gen && c != nil {
		return c
	}
	// Built outside the lock: synced runs in the sync loop and must not
	// wait for an evaluation index over every pod. Problems were
	// reported by the sync; the invalid objects are left out here as the
	// compiler left them out.
	c, _ = explain.New(explain.Input{
		NodeName: in.NodeName, Namespaces: in.Namespaces, Nodes: in.Nodes, Pods: in.Pods.All(),
		NetworkPolicies: in.NetworkPolicies.All(), ClusterNetworkPolicies: in.ClusterNetworkPolicies,
	})
	d.mu.Lock()
	if d.gen == gen {
		d.c, d.built = c, gen
	}
	d.mu.Unlock()
	return c
}
