package deniedflow

import (
	"fmt"
	"net/netip"
	"sort"

	"k8s.io/client-go/tools/cache"

	"github.com/nftguard/nftguard/podset"
)

// The address → pod index that resolves denied-packet records. It is an
// index of the pod informer's own store, so the informer keeps it in step
// with every add, update and delete under the store's lock: a record is
// resolved against exactly the pods the cache holds, in O(1) instead of a
// walk over every pod per record.

// podAddrIndex is the name of the index on the pod informer.
const podAddrIndex = "nftguard.io/pod-address"

// IndexPodAddrs adds the index to the pod informer, whose store holds
// *podset.Pod records; it must be called before the informer starts.
func IndexPodAddrs(inf cache.SharedIndexInformer) error {
	if err := inf.AddIndexers(cache.Indexers{podAddrIndex: podAddrs}); err != nil {
		return fmt.Errorf("index pods by address: %w", err)
	}
	return nil
}

// podAddrs are the keys a pod is indexed under: its addresses in canonical
// form (an API server may hold an IPv6 address written another way than
// the kernel's record prints it). Pods that cannot be the end of a pod
// flow have none: host-network pods share the node's address, and
// finished pods have given theirs back (a new pod may already have it).
func podAddrs(obj any) ([]string, error) {
	p, ok := obj.(*podset.Pod)
	if !ok {
		return nil, nil
	}
	return PodAddrKeys(p), nil
}

// PodAddrKeys are the keys a pod record is resolved by (see podAddrs):
// for an index of pod records kept elsewhere (the agent's PeerSlice
// records, see Resolver.WithPeers), in the same form.
func PodAddrKeys(p *podset.Pod) []string {
	if p.HostNetwork || p.Finished {
		return nil
	}
	var out []string
	for _, ip := range p.IPs {
		if a, err := netip.ParseAddr(ip); err == nil {
			out = append(out, a.Unmap().String())
		}
	}
	return out
}

// AddrKey is the key of addr in PodAddrKeys' form.
func AddrKey(addr netip.Addr) string { return addr.Unmap().String() }

// podByAddr names the pod ("namespace/name") indexed under addr, or "".
// Two pods with one address (possible for a moment while the API server
// hands an address from a deleted pod to a new one) resolve to the first
// by key, so the answer does not depend on the order of events.
func podByAddr(idx cache.Indexer, addr netip.Addr) string {
	objs, err := idx.ByIndex(podAddrIndex, addr.Unmap().String())
	if err != nil || len(objs) == 0 {
		return ""
	}
	keys := make([]string, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*podset.Pod); ok {
			keys = append(keys, p.Namespace+"/"+p.Name)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	sort.Strings(keys)
	return keys[0]
}
