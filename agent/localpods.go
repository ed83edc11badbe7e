package agent

import (
	"context"
	"log/slog"
	"time"

	"github.com/nftguard/nftguard/podset"
)

// localPodsTick is how often the agent counts the pods of its node.
const localPodsTick = 10 * time.Second

// localPods returns a counter of the pods scheduled to node in the cache.
func (s *sources) localPods(node string) func() (int, bool) {
	return func() (int, bool) {
		n := 0
		for _, o := range s.pods.List() {
			if p, ok := o.(*podset.Pod); ok && p.NodeName == node {
				n++
			}
		}
		return n, true
	}
}

// watchLocalPods warns when no pod has been scheduled to this node for
// longer than after. A --node-name that is not the Kubernetes node name
// (the default, the host name, often differs) selects no pod, and the
// agent would quietly enforce nothing; a node that really runs no pod for
// a minute is rare (DaemonSets run on every node, this agent among them).
func watchLocalPods(ctx context.Context, count func() (int, bool), after time.Duration, m *metrics, log *slog.Logger) {
	tick := min(localPodsTick, after/2)
	t := time.NewTicker(tick)
	defer t.Stop()
	emptySince := time.Now() // the caches may still be filling: count from start
	warned := false
	for {
		if n, ok := count(); ok {
			m.localPods.Set(float64(n))
			switch {
			case n > 0:
				if warned {
					log.Info("pods are scheduled to this node again", "pods", n)
				}
				emptySince, warned = time.Time{}, false
				m.nodeWithoutPods.Set(0)
			case emptySince.IsZero():
				emptySince = time.Now()
			case !warned && time.Since(emptySince) >= after:
				warned = true
				m.nodeWithoutPods.Set(1)
				log.Warn("no pod is scheduled to this node: is --node-name the Kubernetes node name? Nothing is enforced for this node's pods",
					"for", time.Since(emptySince).Round(time.Second))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
