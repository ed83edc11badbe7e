package dnsfwd

import (
	"fmt"
	"net/netip"
	"testing"
)

func pod(ns string, i int) holder {
	return holder{ns: ns, pod: [2]netip.Addr{netip.AddrFrom4([4]byte{10, 0, byte(len(ns)), byte(i)})}, ifindex: 10 + i}
}

var defaultShares = shareLimits{total: 256, podMax: 32, podMin: 4, nsMin: 8, startingMax: 16, maxWaiting: 512, reserve: 32}

// fill admits n queries of h and reports how many took a slot, waited,
// and were refused, by reason.
func fill(a *admission, h holder, n int) (took int, waiting []*waiter, refused map[string]int) {
	refused = map[string]int{}
	for range n {
		granted, w, reason := a.admit(h)
		switch {
		case granted:
			took++
		case w != nil:
			waiting = append(waiting, w)
		default:
			refused[reason]++
		}
	}
	return took, waiting, refused
}

func TestAdmissionShapes(t *testing.T) {
	type step struct {
		h                      holder
		n                      int
		took, waited           int
		refused                map[string]int
		release                int // then release this many of h's slots
		releasedGrantsWaitFrom int // index of the step whose waiters must hold the released slots (-1: none)
		stillWaiting           int // index of the step whose waiters must still wait after the release
	}
	victim := pod("x", 1)
	forged := victim
	forged.ifindex = 99 // the victim's address, from another pod's interface
	for _, tc := range []struct {
		name  string
		steps []step
	}{{
		name: "one pod alone holds PodInFlight",
		steps: []step{
			{h: pod("w", 1), n: 40, took: 32, refused: map[string]int{RefusedPodLimit: 8}},
		},
	}, {
		name: "eight pods of a namespace fill the node but its reserve; another namespace is answered at once, and gets what frees",
		steps: func() []step {
			var s []step
			for i := range 7 {
				s = append(s, step{h: pod("w", i), n: 40, took: 32, refused: map[string]int{RefusedPodLimit: 8}})
			}
			// 224 taken: the last 32 are for light namespaces, w's
			// eighth pod waits.
			s = append(s, step{h: pod("w", 7), n: 4, waited: 4})
			// The victim's namespace is light: answered at once.
			s = append(s, step{h: victim, n: 3, took: 3})
			s = append(s, step{h: pod("w", 0), n: 1, refused: map[string]int{RefusedPodLimit: 1}})
			// w's pods release 10: w holds 214, over its share of 128
			// now that x is busy, so its waiters keep waiting...
			s = append(s, step{h: pod("w", 0), release: 10, stillWaiting: 8})
			// ...and ask no more.
			s = append(s, step{h: pod("w", 0), n: 1, refused: map[string]int{RefusedPodShare: 1}})
			// The victim takes up to its namespace minimum from the
			// reserve, then what w freed (to 224), then waits.
			s = append(s, step{h: victim, n: 10, took: 7, waited: 3})
			return s
		}(),
	}, {
		name: "starting sources share one small pool",
		steps: []step{
			// One source alone may take the pool, never more.
			{h: pod(startingNS, 1), n: 20, took: 16, refused: map[string]int{RefusedStartingPool: 4}},
			// Another waits for its share (8 of 16) of it.
			{h: pod(startingNS, 2), n: 10, waited: 8, refused: map[string]int{RefusedStartingPool: 2}},
			// The rest of the node is everyone else's.
			{h: victim, n: 32, took: 32},
			// The pool's next free slot is the second source's.
			{h: pod(startingNS, 1), release: 1, releasedGrantsWaitFrom: -2},
		},
	}, {
		name: "a forged source from another interface never takes the victim's share",
		steps: []step{
			{h: forged, n: 40, took: 32, refused: map[string]int{RefusedPodLimit: 8}},
			{h: victim, n: 4, took: 4},
		},
	}, {
		name: "a namespace keeps its minimum with many namespaces busy",
		steps: func() []step {
			var s []step
			for i := range 40 {
				// Each of 40 namespaces asks for 10: the first ones take
				// their share of the node; later ones keep at least
				// NamespaceMin (8), waiting for it when the node is full.
				s = append(s, step{h: pod(fmt.Sprintf("n%02d", i), 0), n: 10})
			}
			return s
		}(),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAdmission(defaultShares)
			waits := map[int][]*waiter{}
			for i, st := range tc.steps {
				took, waiting, refused := fill(a, st.h, st.n)
				waits[i] = waiting
				if tc.name == "a namespace keeps its minimum with many namespaces busy" {
					if took+len(waiting) < defaultShares.nsMin {
						t.Errorf("step %d: namespace %s took %d and waits for %d, want at least %d together", i, st.h.ns, took, len(waiting), defaultShares.nsMin)
					}
					continue
				}
				if st.refused == nil {
					st.refused = map[string]int{}
				}
				if took != st.took || len(waiting) != st.waited || fmt.Sprint(refused) != fmt.Sprint(st.refused) {
					t.Fatalf("step %d (%v): took %d waited %d refused %v; want %d %d %v", i, st.h, took, len(waiting), refused, st.took, st.waited, st.refused)
				}
				for range st.release {
					a.release(st.h)
				}
				if st.release > 0 && st.releasedGrantsWaitFrom > 0 {
					for _, w := range waits[st.releasedGrantsWaitFrom] {
						if !w.granted {
							t.Errorf("step %d: a waiter of step %d has no slot after %d were released", i, st.releasedGrantsWaitFrom, st.release)
						}
					}
				}
				if st.stillWaiting > 0 {
					for _, w := range waits[st.stillWaiting] {
						if w.granted {
							t.Errorf("step %d: a waiter of step %d got a slot", i, st.stillWaiting)
						}
					}
				}
				if st.releasedGrantsWaitFrom == -2 {
					// Only the first waiter of step i-2 has a slot.
					granted := 0
					for _, w := range waits[i-2] {
						if w.granted {
							granted++
						}
					}
					if granted != st.release {
						t.Errorf("step %d: %d waiters of step %d have a slot, want %d", i, granted, i-2, st.release)
					}
				}
				if a.total > defaultShares.total {
					t.Fatalf("step %d: %d in flight, over %d", i, a.total, defaultShares.total)
				}
			}
		})
	}
}

// TestAdmissionWaiters: the queue is bounded, a freed slot goes to the
// waiter whose namespace holds fewest, a cancelled waiter gives its place
// up, and a waiter that was granted before it cancelled holds its slot.
func TestAdmissionWaiters(t *testing.T) {
	lim := shareLimits{total: 4, podMax: 32, podMin: 4, nsMin: 2, startingMax: 16, maxWaiting: 2}
	a := newAdmission(lim)
	big, small1, small2 := pod("big", 1), pod("s1", 1), pod("s2", 1)
	if took, _, _ := fill(a, big, 4); took != 4 {
		t.Fatalf("big took %d, want all 4", took)
	}
	_, w1, _ := fill(a, small1, 1)
	_, w2, _ := fill(a, small2, 1)
	if len(w1) != 1 || len(w2) != 1 {
		t.Fatalf("the small namespaces do not wait: %d %d", len(w1), len(w2))
	}
	if _, _, refused := fill(a, pod("s3", 1), 1); refused[RefusedGlobalLimit] != 1 {
		t.Fatalf("a third waiter with a full queue: %v, want global_limit", refused)
	}
	// s1 gives up before a slot frees: s2 gets the first.
	if a.cancel(w1[0]) {
		t.Fatal("a waiter with no slot cancelled and was told it holds one")
	}
	a.release(big)
	if !w2[0].granted {
		t.Fatal("the freed slot did not go to the waiting namespace")
	}
	if !a.cancel(w2[0]) {
		t.Fatal("a granted waiter that cancels late must keep its slot")
	}
	a.release(small2)
	for range 3 {
		a.release(big)
	}
	if a.total != 0 || len(a.ns) != 0 || len(a.pods) != 0 || len(a.queue) != 0 {
		t.Fatalf("after every release: total %d, %d namespaces, %d pods, %d waiting", a.total, len(a.ns), len(a.pods), len(a.queue))
	}
}
