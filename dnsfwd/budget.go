package dnsfwd

import (
	"math"
	"net/netip"
	"strings"
	"time"

	"github.com/nftguard/nftguard/fqdn"
)

// DefaultPodElements bounds the elements one pod's answers hold in the
// kernel at a time (Limits.PodElements): well above 1,000 addresses for a
// name, and at 136 bytes an element (its name as comment) 2.2 MiB of
// kernel memory, whatever names the pod resolves.
const DefaultPodElements = 16384

// DefaultNodeElements bounds the elements the pods' answers hold in the
// kernel beyond each pod's first MinPodElements (Limits.NodeElements).
// With the kubelet's default of 110 pods, all subjects, the node holds at
// most 65,536 + 110 × 256 = 93,696 elements: 12.2 MiB of kernel memory
// at 136 bytes an element, charged to the agent's memory cgroup beside
// the 200,000 elements of the policies' budget (package budget), and
// 9.0 MiB of the agent's own to count them (TestElementBudgetMemory: 101
// bytes an element, its key included).
const DefaultNodeElements = 65536

// MinPodElements are the elements each subject pod holds whatever the
// others hold: its first 256 never count against Limits.NodeElements, so
// pods at their limit can fill the node's shared part but never lock
// another pod out.
const MinPodElements = 256

// pruneEvery is how often, at most, the budget looks for expired
// elements when a commit does not fit: an expired element counts until
// then (the count never falls short of what the kernel holds), and a pod
// at its limit cannot make the forwarder scan every element per answer.
const pruneEvery = time.Second

type elemKey struct{ set, key string }

// elementBudget counts the distinct elements the pods' answers added that
// may still be in the kernel, per pod and for the node, each with the
// latest expiry an answer gave it. A refresh of an element the pod holds
// always fits (it adds nothing to the kernel); a new one fits while the
// pod holds fewer than its share (podShare), and either fewer than
// MinPodElements or the pods' elements beyond their first MinPodElements
// are fewer than the node's limit.
type elementBudget struct {
	pods   map[[2]netip.Addr]map[elemKey]time.Time
	sets   map[string]int // elements counted per set
	n      int            // all elements counted
	shared int            // the elements beyond each pod's first MinPodElements
	pruned time.Time
}

func newElementBudget() *elementBudget {
	return &elementBudget{pods: map[[2]netip.Addr]map[elemKey]time.Time{}, sets: map[string]int{}}
}

// podShare is one subject pod's limit: its own MinPodElements and an
// equal share of the node's limit for the subjects of the table, at most
// podLimit. A pod that holds more (it filled the node before others
// became subjects) adds nothing new until it holds less: what expires
// goes to the others.
func podShare(subjects, podLimit, nodeLimit int) int {
	return min(podLimit, MinPodElements+nodeLimit/max(subjects, 1))
}

// admit returns the elements of elems (a commit of pod's, at now) that
// fit, in their order, and how many did not for the pod's limit and for
// the node's.
func (b *elementBudget) admit(now time.Time, pod [2]netip.Addr, elems []fqdn.Element, podLimit, nodeLimit int) (fit []fqdn.Element, overPod, overNode int) {
	held := b.pods[pod]
	if held == nil {
		held = map[elemKey]time.Time{}
		b.pods[pod] = held
	}
	fit = elems[:0:0]
	for _, e := range elems {
		k := elemKey{e.Set, e.Key}
		until := now.Add(e.TTL)
		if u, ok := held[k]; ok {
			// Held (or expired and still counted): a refresh.
			if until.After(u) {
				held[k] = until
			}
			fit = append(fit, e)
			continue
		}
		full := func() bool { return len(held) >= podLimit || len(held) >= MinPodElements && b.shared >= nodeLimit }
		if full() && now.Sub(b.pruned) >= pruneEvery {
			b.prune(now)
			if b.pods[pod] == nil {
				b.pods[pod] = held
			}
		}
		switch {
		case len(held) >= podLimit:
			overPod++
			continue
		case len(held) >= MinPodElements && b.shared >= nodeLimit:
			overNode++
			continue
		}
		if len(held) >= MinPodElements {
			b.shared++
		}
		held[k] = until
		b.sets[k.set]++
		b.n++
		fit = append(fit, e)
	}
	if len(held) == 0 {
		delete(b.pods, pod)
	}
	return fit, overPod, overNode
}

// prune forgets the elements that expired by now.
func (b *elementBudget) prune(now time.Time) {
	b.pruned = now
	b.forget(func(k elemKey, until time.Time) bool { return !until.After(now) })
}

// forgetSets forgets the elements of the sets live does not name: a set
// the table dropped is gone from the kernel with its elements.
func (b *elementBudget) forgetSets(live map[string]bool) {
	gone := false
	for s := range b.sets {
		gone = gone || !live[s]
	}
	if gone {
		b.forget(func(k elemKey, _ time.Time) bool { return !live[k.set] })
	}
}

func (b *elementBudget) forget(drop func(elemKey, time.Time) bool) {
	for pod, held := range b.pods {
		for k, until := range held {
			if drop(k, until) {
				if len(held) > MinPodElements {
					b.shared--
				}
				delete(held, k)
				b.n--
				if b.sets[k.set]--; b.sets[k.set] <= 0 {
					delete(b.sets, k.set)
				}
			}
		}
		if len(held) == 0 {
			delete(b.pods, pod)
		}
	}
}

// budgetFor admits elems of a subject's commit under the pod's share and
// the node's limit, and returns those that fit, in the answer's order.
func (f *Forwarder) budgetFor(key [2]netip.Addr, elems []fqdn.Element, now time.Time) (fit []fqdn.Element, overPod, overNode int) {
	podLimit := podShare(int(f.subjects.Load()), f.lim.PodElements, f.lim.NodeElements)
	f.mu.Lock()
	defer f.mu.Unlock()
	fit, overPod, overNode = f.budget.admit(now, key, elems, podLimit, f.lim.NodeElements)
	f.m.ElementsCounted.Set(float64(f.budget.n))
	return fit, overPod, overNode
}

// tableChanged counts t's subject pods for their shares, and forgets the
// elements of sets t no longer has (Table.Sets: a set no local pod is a
// subject of keeps its elements, and they keep counting).
func (f *Forwarder) tableChanged(t *fqdn.Table) {
	live := map[string]bool{}
	subjects := map[*fqdn.Subject]bool{}
	if t != nil {
		for _, s := range t.Pods {
			if len(s.Rules) == 0 {
				continue
			}
			subjects[s] = true
			for _, r := range s.Rules {
				live[r.Set4], live[r.Set6] = true, true
			}
		}
		for _, s := range t.Sets {
			live[s] = true
		}
	}
	f.subjects.Store(int64(len(subjects)))
	f.mu.Lock()
	defer f.mu.Unlock()
	f.budget.forgetSets(live)
	f.m.ElementsCounted.Set(float64(f.budget.n))
}

// Seed counts elements the domain sets already hold (Key "POD . ADDR",
// TTL the time they have left) in the budget: the sets outlive an agent,
// and a forwarder that started from zero would let the pods add a second
// node's worth next to what an agent before it added. Seeded elements
// count whatever the limits (they are in the kernel), so a pod or node
// over its limit adds nothing new until they expire: it fails closed.
// The agent seeds once, after its first sync, from the kernel.
func (f *Forwarder) Seed(elems []fqdn.Element) {
	t := f.table.Load()
	byPod := map[[2]netip.Addr][]fqdn.Element{}
	for _, e := range elems {
		a, _, ok := strings.Cut(e.Key, " . ")
		if !ok {
			continue
		}
		addr, err := netip.ParseAddr(a)
		if err != nil {
			continue
		}
		key := [2]netip.Addr{addr.Unmap()}
		if sub := t.Lookup(addr); sub != nil {
			key = sub.Addrs
		}
		byPod[key] = append(byPod[key], e)
	}
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	for pod, es := range byPod {
		f.budget.admit(now, pod, es, math.MaxInt, math.MaxInt)
	}
	f.m.ElementsCounted.Set(float64(f.budget.n))
}
