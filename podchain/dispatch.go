package podchain

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/problem"
	"github.com/nftguard/nftguard/selection"
)

// Dispatch fills the verdict maps that send a local pod's address to its
// chain of each kind: one map per kind and family (IPv4, IPv6).
//
// An address already a key of a map (another local pod lists it: a stale
// or hand-written status; a cluster's network plugin never hands one out
// twice) stays with the first pod in key order, whose chain decides for
// it, and the other pod is reported: one key twice would make the kernel
// refuse the whole batch.
type Dispatch struct {
	maps []KindMaps
	// index is the place of a kind's maps in maps.
	index map[*Kind]int
	// linkLocal are local pods' own link-local addresses by key (see
	// package podguard): keys of the pod's chains like its pod IPs.
	linkLocal map[string][]string
	owner     map[dispatchKey]*selection.Member
	reported  map[sharedKey]bool
	problems  []problem.Problem
}

// dispatchKey is a key of one verdict map; sharedKey a pod's address that
// another pod's chain already decides for.
type (
	dispatchKey struct {
		kind *Kind
		addr string
	}
	sharedKey struct {
		p    *selection.Member
		addr string
	}
)

// KindMaps are the verdict maps that send a local pod's address to its
// chain of Kind: Maps[0] keyed by IPv4 addresses, Maps[1] by IPv6.
type KindMaps struct {
	Kind *Kind
	Maps [2]engine.Set
}

// NewDispatch fills the maps given, one KindMaps per kind of chain, in the
// order of the output.
func NewDispatch(maps ...KindMaps) *Dispatch {
	index := make(map[*Kind]int, len(maps))
	for i, km := range maps {
		index[km.Kind] = i
	}
	return &Dispatch{maps: maps, index: index, owner: map[dispatchKey]*selection.Member{}}
}

// WithLinkLocal makes each pod's own link-local addresses (by pod key,
// canonical text; package podguard guarantees no two pods share one)
// keys of its chains too: only the guard lets them leave the pod, so
// they are as much the pod's as its IPs.
func (d *Dispatch) WithLinkLocal(ll map[string][]string) *Dispatch {
	d.linkLocal = ll
	return d
}

// Add makes p's addresses jump to chain in the maps of kind k, one of the
// kinds NewDispatch was given.
func (d *Dispatch) Add(k *Kind, p *selection.Member, chain string) {
	i, ok := d.index[k]
	if !ok {
		panic("podchain: Dispatch.Add of a kind NewDispatch was not given: " + k.ChainPrefix)
	}
	v := JumpTo(chain)
	v4, v6 := p.V4Text(), p.V6Text()
	if ll := d.linkLocal[p.Key]; len(ll) > 0 {
		v4, v6 = slices.Clip(v4), slices.Clip(v6)
		for _, a := range ll {
			if strings.Contains(a, ":") {
				v6 = append(v6, a)
			} else {
				v4 = append(v4, a)
			}
		}
	}
	for f, addrs := range [2][]string{v4, v6} {
		m := &d.maps[i].Maps[f]
		for _, a := range addrs {
			dk := dispatchKey{k, a}
			if o, taken := d.owner[dk]; taken {
				// Reported once per pod and address, not per map.
				if o != p && !d.reported[sharedKey{p, a}] {
					if d.reported == nil {
						d.reported = map[sharedKey]bool{}
					}
					d.reported[sharedKey{p, a}] = true
					d.problems = append(d.problems, sharedAddress(p, a, o.Key))
				}
				continue
			}
			d.owner[dk] = p
			m.Elements = append(m.Elements, engine.Element{Key: a, Value: v})
		}
	}
}

// Maps returns the maps, their elements sorted, in the order given.
func (d *Dispatch) Maps() []engine.Set {
	out := make([]engine.Set, 0, 2*len(d.maps))
	for i := range d.maps {
		for f := range d.maps[i].Maps {
			s := d.maps[i].Maps[f]
			sort.Slice(s.Elements, func(i, j int) bool { return s.Elements[i].Key < s.Elements[j].Key })
			out = append(out, s)
		}
	}
	return out
}

// Problems are the local pods whose address another pod came first with.
func (d *Dispatch) Problems() []problem.Problem { return d.problems }

// DropSharedLocal keeps, of local pods that share a namespace and name, the
// first in key order, and reports the others: the key names the pod's
// chains, and two chains of one name make the kernel refuse the whole
// batch. A cluster never has two (the API server keeps names unique);
// hand-written manifests can. local is sorted by key and shared: it is
// copied before a pod is dropped.
func DropSharedLocal(local []*selection.Member) ([]*selection.Member, []problem.Problem) {
	var kept []*selection.Member
	var problems []problem.Problem
	for i, p := range local {
		if i > 0 && local[i-1].Key == p.Key {
			if kept == nil {
				kept = append(make([]*selection.Member, 0, len(local)), local[:i]...)
			}
			problems = append(problems, problem.Problem{Object: PodObject(p), Local: true,
				Reason: "another Pod of the same namespace and name on this node comes first"})
			continue
		}
		if kept != nil {
			kept = append(kept, p)
		}
	}
	if kept != nil {
		return kept, problems
	}
	return local, problems
}

// Both problems are Local: they depend on this node's own pods, so no
// other node finds them.

// PodObject names a pod in a problem.
func PodObject(p *selection.Member) problem.Object {
	return problem.Object{APIVersion: problem.CoreV1, Kind: "Pod", Namespace: p.Obj.Namespace, Name: p.Obj.Name}
}

// sharedAddress is the problem of a local pod whose address another local
// pod (other) came first with.
func sharedAddress(p *selection.Member, addr, other string) problem.Problem {
	return problem.Problem{Object: PodObject(p), Field: "status.podIPs", Local: true,
		Reason: fmt.Sprintf("address %s is also pod %s's, whose policies decide for it", addr, other)}
}
