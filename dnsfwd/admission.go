package dnsfwd

import (
	"net/netip"
)

// Admission shares the node's in-flight queries (Limits.InFlight) fairly:
// first among the namespaces with queries in flight or waiting, then among
// the pods of each. A query is charged to its pod, as the Table names it
// from the query's source address, and to the pod's namespace; a query
// from an address of the node's pod ranges that no pod has (a pod
// starting) is charged to one pool shared by all such sources, which is
// small (Limits.StartingInFlight).
//
// The shares, with A the namespaces with queries in flight or waiting
// (the asking one included) and P the pods of the namespace that have:
//
//	namespace share  max(Limits.NamespaceMin, InFlight / A)
//	                 (the starting pool: at most StartingInFlight)
//	pod share        min(PodInFlight, max(PodMin, namespace share / P))
//
// The last slots (reserve: four NamespaceMin, at most a quarter of
// InFlight) are only for namespaces that hold fewer than NamespaceMin: a
// namespace that asks little is answered at once, even while others keep
// the rest taken (and refill it in bursts), unless several light
// namespaces together hold the reserve. Starting pods never use it.
//
// A query within its pod's share takes a slot when one is free and its
// namespace is within its share; else it waits (at most Limits.QueueWait;
// at most a namespace's share of its queries, and twice InFlight in all),
// and a slot that frees goes to the waiting query whose namespace, then
// pod, holds the fewest. A query over its pod's share is refused at once.
// So a namespace or a pod that filled the node while it was alone keeps
// what it holds, but cannot take back what frees while another waits:
// the other gets every freed slot until both are within their shares. No
// clock is involved: who gets a slot depends only on what is held and
// waiting.
//
// A pod's UDP queries from each interface are a holder of their own, and
// so are its TCP queries (ifindex 0; Limits.PodConns bounds them).

// startingNS is the namespace of the starting pool. No namespace has this
// name (a namespace name is a DNS label).
const startingNS = "/starting"

// holder is who a query is charged to: a pod of a namespace, as the
// interface it came in on shows it (see Forwarder.holder).
type holder struct {
	ns  string
	pod [2]netip.Addr // Subject.Addrs, or a starting pod's one address
	// ifindex is the interface the query arrived on (0: not known, as
	// for TCP). A query with a pod's address from another pod's
	// interface is charged to a holder of its own.
	ifindex int
}

type shareLimits struct {
	total, podMax, podMin, nsMin, startingMax, maxWaiting int
	reserve                                               int // the last slots, for namespaces under nsMin
}

type nsCount struct {
	n, waiting int
	pods       int // holders of the namespace with queries in flight or waiting
}

type podCount struct{ n, waiting int }

// waiter is a query waiting for a slot. granted is set, under the
// admission's lock, when a freed slot is given to it; ready is closed then.
type waiter struct {
	h       holder
	seq     uint64
	granted bool
	ready   chan struct{}
}

// admission is the pure state of the shares: the caller holds a lock.
type admission struct {
	lim   shareLimits
	total int
	ns    map[string]*nsCount
	pods  map[holder]*podCount
	queue []*waiter
	seq   uint64
}

func newAdmission(lim shareLimits) *admission {
	return &admission{lim: lim, ns: map[string]*nsCount{}, pods: map[holder]*podCount{}}
}

// shares are h's namespace and pod shares, counting h as active.
func (a *admission) shares(h holder) (nsShare, podShare int) {
	nsActive := len(a.ns)
	nc := a.ns[h.ns]
	podsActive := 1
	if nc == nil {
		nsActive++
	} else {
		podsActive = nc.pods
		if a.pods[h] == nil {
			podsActive++
		}
	}
	nsShare = max(a.lim.nsMin, a.lim.total/nsActive)
	if h.ns == startingNS {
		nsShare = min(nsShare, a.lim.startingMax)
	}
	podShare = min(a.lim.podMax, max(a.lim.podMin, nsShare/podsActive))
	return nsShare, podShare
}

// counts are h's namespace's and its own queries in flight and waiting.
func (a *admission) counts(h holder) (ns, pod podCount) {
	if nc := a.ns[h.ns]; nc != nil {
		ns = podCount{nc.n, nc.waiting}
	}
	if pc := a.pods[h]; pc != nil {
		pod = *pc
	}
	return ns, pod
}

// over is why h's next query is over its share ("" if it is within it),
// counting the queries h already has waiting. A query within its pod's
// share may wait while its namespace holds more than the namespace's
// share (the namespace's other pods took it while it was alone), but a
// namespace has at most its share waiting.
func (a *admission) over(h holder) string {
	nsShare, podShare := a.shares(h)
	ns, pod := a.counts(h)
	starting := h.ns == startingNS
	switch {
	case pod.n+pod.waiting >= a.lim.podMax:
		return RefusedPodLimit
	case starting && (pod.n+pod.waiting >= podShare || ns.waiting >= nsShare):
		return RefusedStartingPool
	case pod.n+pod.waiting >= podShare:
		return RefusedPodShare
	case ns.waiting >= nsShare:
		return RefusedNamespaceShare
	}
	return ""
}

// fits reports whether h can take a slot now.
func (a *admission) fits(h holder) bool {
	if a.total >= a.lim.total {
		return false
	}
	nsShare, podShare := a.shares(h)
	ns, pod := a.counts(h)
	light := ns.n < a.lim.nsMin && h.ns != startingNS
	return ns.n < nsShare && pod.n < podShare && (light || a.total < a.lim.total-a.lim.reserve)
}

// admit takes a slot for a query of h (granted), or queues it (a waiter
// to wait on), or refuses it and says why.
func (a *admission) admit(h holder) (granted bool, w *waiter, reason string) {
	if r := a.over(h); r != "" {
		return false, nil, r
	}
	if a.fits(h) {
		a.take(h)
		return true, nil, ""
	}
	if len(a.queue) >= a.lim.maxWaiting {
		return false, nil, RefusedGlobalLimit
	}
	a.seq++
	w = &waiter{h: h, seq: a.seq, ready: make(chan struct{})}
	a.queue = append(a.queue, w)
	a.count(h, 0, 1)
	return false, w, ""
}

// release frees h's slot and gives the free slots to waiters, fewest
// held first.
func (a *admission) release(h holder) {
	a.count(h, -1, 0)
	a.total--
	a.grant()
}

// cancel takes w out of the queue (it waited too long) and reports
// false, or reports true if a slot was given to it meanwhile, which the
// caller then holds and releases as any other.
func (a *admission) cancel(w *waiter) bool {
	if w.granted {
		return true
	}
	for i, q := range a.queue {
		if q == w {
			a.queue = append(a.queue[:i], a.queue[i+1:]...)
			break
		}
	}
	a.count(w.h, 0, -1)
	// Fewer waiting can make another waiter's share larger.
	a.grant()
	return false
}

func (a *admission) grant() {
	for a.total < a.lim.total {
		// fits is checked per waiter: a slot of the reserve goes only
		// to a light namespace's.
		best := -1
		var bestNS, bestPod int
		for i, w := range a.queue {
			if !a.fits(w.h) {
				continue
			}
			ns, pod := a.counts(w.h)
			// The queue is in arrival order: the first of equals wins.
			if best < 0 || ns.n < bestNS || ns.n == bestNS && pod.n < bestPod {
				best, bestNS, bestPod = i, ns.n, pod.n
			}
		}
		if best < 0 {
			return
		}
		w := a.queue[best]
		a.queue = append(a.queue[:best], a.queue[best+1:]...)
		a.count(w.h, 0, -1)
		a.take(w.h)
		w.granted = true
		close(w.ready)
	}
}

func (a *admission) take(h holder) {
	a.count(h, 1, 0)
	a.total++
}

// count adds dn in flight and dw waiting to h and its namespace, and
// forgets either once it has neither.
func (a *admission) count(h holder, dn, dw int) {
	nc := a.ns[h.ns]
	if nc == nil {
		nc = &nsCount{}
		a.ns[h.ns] = nc
	}
	pc := a.pods[h]
	if pc == nil {
		pc = &podCount{}
		a.pods[h] = pc
		nc.pods++
	}
	pc.n += dn
	pc.waiting += dw
	nc.n += dn
	nc.waiting += dw
	if pc.n <= 0 && pc.waiting <= 0 {
		delete(a.pods, h)
		nc.pods--
	}
	if nc.n <= 0 && nc.waiting <= 0 {
		delete(a.ns, h.ns)
	}
}
