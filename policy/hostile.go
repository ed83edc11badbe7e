package policy

import (
	"fmt"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/problem"
	"github.com/nftguard/nftguard/selection"
)

// dropSharedLocal keeps, of local pods that share a namespace and name, the
// first in key order, and reports the others: the key names the pod's
// chains, and two chains of one name make the kernel refuse the whole batch.
// A cluster never has two (the API server keeps names unique); hand-written
// manifests can. local is sorted by key and shared: it is copied before a
// pod is dropped.
func dropSharedLocal(local []*selection.Pod, problems *[]problem.Problem) []*selection.Pod {
	var kept []*selection.Pod
	for i, p := range local {
		if i > 0 && local[i-1].Key == p.Key {
			if kept == nil {
				kept = append(make([]*selection.Pod, 0, len(local)), local[:i]...)
			}
			*problems = append(*problems, problem.Problem{Object: podObject(p),
				Reason: "another Pod of the same namespace and name on this node comes first"})
			continue
		}
		if kept != nil {
			kept = append(kept, p)
		}
	}
	if kept != nil {
		return kept
	}
	return local
}

// addDispatch makes p's addresses jump to its chain in the verdict maps m4
// and m6. An address already a key there (another local pod lists it: a
// stale or hand-written status; a cluster's network plugin never hands one
// out twice) stays with the first pod in key order, whose chain decides for
// it, and p is reported: one key twice would make the kernel refuse the
// whole batch.
func (c *compiler) addDispatch(m4, m6 *engine.Set, p *selection.Pod, chain string) {
	v := "jump " + chain
	if c.dispatch == nil {
		c.dispatch = make(map[dispatchKey]*selection.Pod, 4*len(c.sel.Local()))
	}
	for _, fam := range [2]struct {
		m     *engine.Set
		addrs []string
	}{{m4, p.V4Text()}, {m6, p.V6Text()}} {
		for _, a := range fam.addrs {
			k := dispatchKey{fam.m, a}
			if o, taken := c.dispatch[k]; taken {
				// Reported once per pod and address, not per map.
				if o != p && !c.sharedReported[sharedKey{p, a}] {
					if c.sharedReported == nil {
						c.sharedReported = map[sharedKey]bool{}
					}
					c.sharedReported[sharedKey{p, a}] = true
					c.problems = append(c.problems, sharedAddress(p, a, o.Key))
				}
				continue
			}
			c.dispatch[k] = p
			fam.m.Elements = append(fam.m.Elements, engine.Element{Key: a, Value: v})
		}
	}
}

// dispatchKey is a key of one verdict map; sharedKey a pod's address that
// another pod's chain already decides for.
type (
	dispatchKey struct {
		m    *engine.Set
		addr string
	}
	sharedKey struct {
		p    *selection.Pod
		addr string
	}
)

func podObject(p *selection.Pod) problem.Object {
	return problem.Object{APIVersion: problem.CoreV1, Kind: "Pod", Namespace: p.Obj.Namespace, Name: p.Obj.Name}
}

// sharedAddress is the problem of a local pod whose address another local
// pod (other) came first with.
func sharedAddress(p *selection.Pod, addr, other string) problem.Problem {
	return problem.Problem{Object: podObject(p), Field: "status.podIPs",
		Reason: fmt.Sprintf("address %s is also pod %s's, whose policies decide for it", addr, other)}
}
