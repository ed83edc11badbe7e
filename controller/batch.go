package controller

import (
	"cmp"
	"slices"
	"time"
)

// batcher holds the dirty namespaces. A namespace is flushed BatchDelay
// after the first change that dirtied it: later changes join that flush
// but do not postpone it, so the delay is bounded. Pure: the caller gives
// the time.
type batcher struct {
	delay time.Duration
	dirty map[string]dirtyNS
	// busy namespaces are being flushed: a change meanwhile waits for the
	// next flush, so one namespace is never written by two workers.
	busy map[string]bool
}

type dirtyNS struct {
	ns string
	// since is the first change not yet written (for the publish delay).
	since time.Time
	// at is when the namespace is flushed.
	at time.Time
}

func newBatcher(delay time.Duration) *batcher {
	return &batcher{delay: delay, dirty: map[string]dirtyNS{}, busy: map[string]bool{}}
}

// mark dirties a namespace changed at now; it reports whether the
// namespace's flush time is new (the dispatcher's timer may need to move).
func (b *batcher) mark(ns string, now time.Time) bool {
	return b.markAt(ns, now, now.Add(b.delay))
}

// markAt dirties a namespace to be flushed at at, or earlier if it is
// dirty already and due sooner.
func (b *batcher) markAt(ns string, now, at time.Time) bool {
	if d, ok := b.dirty[ns]; ok {
		if !at.Before(d.at) {
			return false
		}
		d.at = at
		b.dirty[ns] = d
		return true
	}
	b.dirty[ns] = dirtyNS{ns: ns, since: now, at: at}
	return true
}

// retry dirties a namespace whose flush failed, keeping since, to be
// flushed again at at (or earlier if it was dirtied again meanwhile).
func (b *batcher) retry(ns string, since, at time.Time) {
	if d, ok := b.dirty[ns]; ok {
		d.since = minTime(d.since, since)
		b.dirty[ns] = d
		return
	}
	b.dirty[ns] = dirtyNS{ns: ns, since: since, at: at}
}

// due takes the namespaces to flush now (marked busy, oldest first) and
// returns the next flush time of the rest (zero: none).
func (b *batcher) due(now time.Time) (ready []dirtyNS, next time.Time) {
	for ns, d := range b.dirty {
		if b.busy[ns] {
			continue
		}
		if !d.at.After(now) {
			ready = append(ready, d)
			continue
		}
		if next.IsZero() || d.at.Before(next) {
			next = d.at
		}
	}
	for _, d := range ready {
		delete(b.dirty, d.ns)
		b.busy[d.ns] = true
	}
	slices.SortFunc(ready, func(x, y dirtyNS) int {
		return cmp.Or(x.at.Compare(y.at), cmp.Compare(x.ns, y.ns))
	})
	return ready, next
}

// done ends a namespace's flush.
func (b *batcher) done(ns string) { delete(b.busy, ns) }

// pending is how many namespaces wait for a flush.
func (b *batcher) pending() int { return len(b.dirty) }

// reset forgets every dirty namespace (leadership lost: the next leader
// plans every namespace anyway).
func (b *batcher) reset() { clear(b.dirty) }

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
