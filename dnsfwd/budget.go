package dnsfwd

import (
	"net/netip"
	"time"

	"github.com/nftguard/nftguard/fqdn"
)

// DefaultPodElements bounds the elements one pod's answers hold in the
// kernel at a time (Limits.PodElements): well above 1,000 addresses for a
// name, and at 136 bytes an element (its name as comment) 2.2 MiB of
// kernel memory, whatever names the pod resolves.
const DefaultPodElements = 16384

// podBudget counts the elements a pod's commits added that may still be
// in the kernel: each commit is held until its longest TTL passes. A
// refresh of an element counts again (the count never falls short of
// what the kernel holds); the entries are at most PodElements, one per
// commit.
type podBudget struct {
	held []heldCommit
	n    int
}

type heldCommit struct {
	until time.Time
	n     int
}

// admit drops what expired by now and returns how many of want elements
// fit under limit, recording them until until.
func (b *podBudget) admit(now, until time.Time, want, limit int) int {
	kept := b.held[:0]
	b.n = 0
	for _, h := range b.held {
		if h.until.After(now) {
			kept = append(kept, h)
			b.n += h.n
		}
	}
	clear(b.held[len(kept):])
	b.held = kept
	fit := min(want, limit-b.n)
	if fit <= 0 {
		return 0
	}
	b.held = append(b.held, heldCommit{until: until, n: fit})
	b.n += fit
	return fit
}

// budgetFor admits elems of a subject's commit under the pod's budget and
// returns those that fit, in the answer's order.
func (f *Forwarder) budgetFor(key [2]netip.Addr, elems []fqdn.Element, now time.Time) []fqdn.Element {
	var longest time.Duration
	for _, e := range elems {
		longest = max(longest, e.TTL)
	}
	f.mu.Lock()
	b := f.budgets[key]
	if b == nil {
		b = &podBudget{}
		f.budgets[key] = b
	}
	fit := b.admit(now, now.Add(longest), len(elems), f.lim.PodElements)
	f.mu.Unlock()
	return elems[:fit]
}

// forgetBudgets drops the budgets of pods no longer subjects of t.
func (f *Forwarder) forgetBudgets(t *fqdn.Table) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for key := range f.budgets {
		if t.Lookup(key[0]) == nil && (!key[1].IsValid() || t.Lookup(key[1]) == nil) {
			delete(f.budgets, key)
		}
	}
}
