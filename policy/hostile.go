package policy

import (
	"fmt"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/problem"
)

// dropSharedLocal keeps, of local pods that share a namespace and name, the
// first in key order, and reports the others: the key names the pod's
// chains, and two chains of one name make the kernel refuse the whole batch.
// A cluster never has two (the API server keeps names unique); hand-written
// manifests can.
func (c *compiler) dropSharedLocal() {
	if len(c.local) < 2 {
		return
	}
	var kept []*pod
	for i, p := range c.local {
		if i > 0 && c.local[i-1].key == p.key {
			if kept == nil {
				kept = append(make([]*pod, 0, len(c.local)), c.local[:i]...)
			}
			c.problems = append(c.problems, problem.Problem{Object: podObject(p),
				Reason: "another Pod of the same namespace and name on this node comes first"})
			continue
		}
		if kept != nil {
			kept = append(kept, p)
		}
	}
	if kept != nil {
		c.local = kept
	}
}

// addDispatch makes p's addresses jump to its chain in the verdict maps m4
// and m6. An address already a key there (another local pod lists it: a
// stale or hand-written status; a cluster's network plugin never hands one
// out twice) stays with the first pod in key order, whose chain decides for
// it, and p is reported: one key twice would make the kernel refuse the
// whole batch.
func (c *compiler) addDispatch(m4, m6 *engine.Set, p *pod, chain string) {
	v := "jump " + chain
	for _, fam := range [2]struct {
		m     *engine.Set
		addrs []string
	}{{m4, p.v4s}, {m6, p.v6s}} {
		for _, a := range fam.addrs {
			k := fam.m.Name + " " + a
			if c.dispatch == nil {
				c.dispatch = map[string]*pod{}
			}
			if o, taken := c.dispatch[k]; taken {
				if o != p {
					c.problems = append(c.problems, sharedAddress(p, a, o.key))
				}
				continue
			}
			c.dispatch[k] = p
			fam.m.Elements = append(fam.m.Elements, engine.Element{Key: a, Value: v})
		}
	}
}

func podObject(p *pod) problem.Object {
	return problem.Object{APIVersion: problem.CoreV1, Kind: "Pod", Namespace: p.obj.Namespace, Name: p.obj.Name}
}

// sharedAddress is the problem of a local pod whose address another local
// pod (other) came first with.
func sharedAddress(p *pod, addr, other string) problem.Problem {
	return problem.Problem{Object: podObject(p), Field: "status.podIPs",
		Reason: fmt.Sprintf("address %s is also pod %s's, whose policies decide for it", addr, other)}
}
