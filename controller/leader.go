package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"

	"github.com/nftguard/nftguard/peerslice"
)

// lead is one term as leader: it returns when lctx ends (the lease is
// lost or Run's context ended), and makes no write after.
func (c *controller) lead(lctx context.Context) {
	c.log.Info("leading: writing PeerSlices", "identity", c.cfg.Identity)
	c.m.leader.Set(1)
	c.mu.Lock()
	c.leading = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.leading = false
		c.batch.reset()
		c.initial = nil
		c.m.dirty.Set(0)
		c.mu.Unlock()
		c.m.leader.Set(0)
		c.log.Info("no longer leading: stopped writing PeerSlices")
	}()
	if !cache.WaitForCacheSync(lctx.Done(), c.synced) {
		return
	}
	// The first full reconcile: every namespace with records or slices
	// is planned against the slices found (a previous leader's), so an
	// unchanged cluster costs no write.
	c.mu.Lock()
	now := c.clk.Now()
	c.initial = map[string]bool{}
	c.initialDone = make(chan struct{})
	for _, nss := range [][]string{c.st.namespaces(), c.sliceNamespaces()} {
		for _, ns := range nss {
			c.initial[ns] = true
			c.batch.markAt(ns, now, now)
		}
	}
	if len(c.initial) == 0 {
		close(c.initialDone)
	}
	initialDone := c.initialDone
	c.m.dirty.Set(float64(c.batch.pending()))
	c.mu.Unlock()

	var wg sync.WaitGroup
	work := make(chan dirtyNS)
	for range c.cfg.Workers {
		wg.Go(func() { c.worker(lctx, work) })
	}
	wg.Go(func() { c.dispatch(lctx, work) })
	select {
	case <-initialDone:
		c.log.Info("first full reconcile done: every namespace's PeerSlices match the Pods")
		c.annotate(lctx)
	case <-lctx.Done():
	}
	wg.Wait()
}

// dispatch hands due namespaces to the workers until lctx ends.
func (c *controller) dispatch(lctx context.Context, work chan<- dirtyNS) {
	for {
		c.mu.Lock()
		now := c.clk.Now()
		ready, next := c.batch.due(now)
		c.m.dirty.Set(float64(c.batch.pending()))
		c.mu.Unlock()
		for _, d := range ready {
			select {
			case work <- d:
			case <-lctx.Done():
				return
			}
		}
		var timer <-chan time.Time
		var t clock.Timer
		if !next.IsZero() {
			t = c.clk.NewTimer(next.Sub(now))
			timer = t.C()
		}
		select {
		case <-lctx.Done():
		case <-c.wake:
		case <-timer:
		}
		if t != nil {
			t.Stop()
		}
		if lctx.Err() != nil {
			return
		}
	}
}

func (c *controller) worker(lctx context.Context, work <-chan dirtyNS) {
	for {
		var d dirtyNS
		select {
		case <-lctx.Done():
			return
		case d = <-work:
		}
		writes, err := c.flush(lctx, d.ns)
		now := c.clk.Now()
		c.mu.Lock()
		c.batch.done(d.ns)
		if err != nil {
			if lctx.Err() == nil {
				c.log.Warn("writing PeerSlices failed; retrying", "namespace", d.ns, "err", err)
				c.batch.retry(d.ns, d.since, now.Add(retryDelay))
			}
		} else if c.initial != nil && c.initial[d.ns] {
			delete(c.initial, d.ns)
			if len(c.initial) == 0 {
				close(c.initialDone)
			}
		}
		c.m.slices.Set(float64(len(c.slices.GetStore().ListKeys())))
		c.mu.Unlock()
		if err == nil && writes > 0 {
			c.m.delay.Observe(now.Sub(d.since).Seconds())
		}
		c.poke()
	}
}

// flush makes a namespace's slices hold its desired records, and returns
// how many writes that took.
func (c *controller) flush(lctx context.Context, ns string) (writes int, err error) {
	for range maxReplans {
		c.mu.Lock()
		desired := c.st.desired(ns)
		current := c.ov.current(ns, c.cachedSlices(ns))
		c.mu.Unlock()
		plan := peerslice.Plan(ns, current, desired, c.cfg.Slices)
		replan := false
		for _, ch := range plan {
			err := c.write(lctx, ch)
			if err == nil {
				writes++
				continue
			}
			if lctx.Err() != nil || !(apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err)) {
				return writes, err
			}
			// The cache was behind: read the slice itself and plan
			// again from it.
			if err := c.refresh(lctx, ch.Slice); err != nil {
				return writes, err
			}
			replan = true
			break
		}
		if !replan {
			return writes, nil
		}
	}
	return writes, fmt.Errorf("namespace %s: slices still changing under the controller after %d plans", ns, maxReplans)
}

// fieldManager names the controller's writes in managedFields, the same
// whatever the binary's user agent.
const fieldManager = "nftguard-controller"

func (c *controller) write(lctx context.Context, ch peerslice.Change) error {
	op := ch.Op.String()
	api := c.cfg.Dynamic.Resource(peerslice.GroupVersionResource).Namespace(ch.Slice.Namespace)
	var err error
	switch ch.Op {
	case peerslice.Create, peerslice.Update:
		u, cerr := peerslice.ToUnstructured(ch.Slice)
		if cerr != nil {
			return cerr
		}
		var out *unstructured.Unstructured
		if ch.Op == peerslice.Create {
			out, err = api.Create(lctx, u, metav1.CreateOptions{FieldManager: fieldManager})
		} else {
			out, err = api.Update(lctx, u, metav1.UpdateOptions{FieldManager: fieldManager})
		}
		if err == nil {
			var s *peerslice.PeerSlice
			if s, err = peerslice.FromUnstructured(out); err == nil {
				s.ManagedFields = nil
				c.mu.Lock()
				c.ov.wrote(s, false)
				c.mu.Unlock()
			}
		}
	case peerslice.Delete:
		rv := ch.Slice.ResourceVersion
		err = api.Delete(lctx, ch.Slice.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		if err == nil {
			c.mu.Lock()
			c.ov.wrote(ch.Slice, true)
			c.mu.Unlock()
		}
	default:
		return fmt.Errorf("unknown op %v", ch.Op)
	}
	if err != nil {
		c.m.writeErrors.WithLabelValues(op).Inc()
		name := ch.Slice.Name
		if name == "" {
			name = ch.Slice.GenerateName + "*"
		}
		return fmt.Errorf("%s PeerSlice %s/%s: %w", op, ch.Slice.Namespace, name, err)
	}
	c.m.writes.WithLabelValues(op).Inc()
	c.log.Debug("wrote PeerSlice", "op", op, "namespace", ch.Slice.Namespace, "name", ch.Slice.Name, "records", len(ch.Slice.Peers))
	return nil
}

// refresh reads a slice a write found changed or gone into the overlay.
func (c *controller) refresh(lctx context.Context, s *peerslice.PeerSlice) error {
	if s.Name == "" {
		return nil // a create: nothing to read
	}
	u, err := c.cfg.Dynamic.Resource(peerslice.GroupVersionResource).Namespace(s.Namespace).Get(lctx, s.Name, metav1.GetOptions{})
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case apierrors.IsNotFound(err):
		c.ov.wrote(s, true)
		return nil
	case err != nil:
		c.ov.forget(s.Namespace, s.Name)
		return fmt.Errorf("read PeerSlice %s/%s: %w", s.Namespace, s.Name, err)
	}
	got, err := peerslice.FromUnstructured(u)
	if err != nil {
		return err
	}
	got.ManagedFields = nil
	c.ov.wrote(got, false)
	return nil
}

// annotate sets AnnotationPublished on the Lease: the agents' sign that
// the records are complete. Retried until it succeeds or the term ends.
func (c *controller) annotate(lctx context.Context) {
	leases := c.cfg.Kube.CoordinationV1().Leases(c.cfg.LeaseNamespace)
	for {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			l, err := leases.Get(lctx, c.cfg.LeaseName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if l.Annotations[peerslice.AnnotationPublished] == c.cfg.Identity {
				return nil
			}
			if l.Annotations == nil {
				l.Annotations = map[string]string{}
			}
			l.Annotations[peerslice.AnnotationPublished] = c.cfg.Identity
			_, err = leases.Update(lctx, l, metav1.UpdateOptions{})
			return err
		})
		if err == nil {
			c.log.Info("published: set the lease annotation", "annotation", peerslice.AnnotationPublished)
			return
		}
		if lctx.Err() != nil {
			return
		}
		c.log.Warn("cannot annotate the lease; retrying", "err", err)
		select {
		case <-lctx.Done():
			return
		case <-c.clk.After(retryDelay):
		}
	}
}
