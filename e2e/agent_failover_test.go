package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/internal/netlab"
	"github.com/nftguard/nftguard/peerslice"
)

// TestAgentSlicesFailover runs three agents in slices mode and two
// controller replicas (`nftguard controller`, deploy/'s RBAC, 3s Lease),
// with policies whose peers are pods of other nodes selected by labels:
// each agent knows them only through PeerSlice records.
//
//   - real packets, IPv4 and IPv6, same node and across nodes, obey the
//     policies (named ports resolved on the records);
//   - 200 pods and 50 policies churn in bursts; halfway through, the
//     leader is SIGKILLed and, while no controller leads, a lab pod loses
//     the label that lets it through: the standby takes over (time to
//     lead, to re-publish, and the writes it made on the way are logged),
//     the verdict changes on every node, the records are fresh again;
//   - every agent's table then equals a fresh compile of the API state
//     (doctor -f, as runChurn checks) and the whole matrix is right.
func TestAgentSlicesFailover(t *testing.T) {
	a := newAgentLabWith(t, agentLabOptions{peerSource: "slices", controllers: 2})
	ctx := context.Background()
	for _, n := range agentTopology {
		if v := metricValue(a.agents[n.Name].metrics(t), `nftguard_peer_source{source="slices"}`); v != 1 {
			t.Fatalf("agent %s does not read slices (%v)", n.Name, v)
		}
	}

	a.labelOnlyPeerPolicies(ctx)
	t.Run("packets before the failover", func(t *testing.T) {
		a.convergeFamilies(t, "label-only peers through records", a.failoverExpect())
	})

	t.Run("churn with a controller failover", func(t *testing.T) {
		leader := a.leader()
		if leader == nil {
			t.Fatalf("no controller leads:\n%s", a.ctlLogs())
		}
		var standby *ctlProc
		for _, c := range a.ctls {
			if c != leader {
				standby = c
			}
		}
		if w := standby.writes(); w != 0 {
			t.Errorf("the standby wrote %v times before it led", w)
		}
		// Watched from a goroutine while the churn goes on: the moments
		// the standby leads and re-publishes, and its writes by then.
		type takeover struct {
			killed, leads, published, flipped time.Time
			writesPublished                   float64
		}
		var (
			tk      takeover
			watched sync.WaitGroup
		)
		var labelChanged time.Time
		mid := func() {
			t.Logf("failover: SIGKILL the leader %s, standby %s", leader.id, standby.id)
			tk.killed = time.Now()
			leader.kill(t)
			// While no controller leads: x/c (on n3) loses the label
			// that lets it reach x and y on port 80.
			a.setPodLabel(ctx, "x/c", "access", "no")
			labelChanged = time.Now()
			watched.Go(func() {
				deadline := tk.killed.Add(time.Minute)
				for time.Now().Before(deadline) && (tk.published.IsZero() || tk.flipped.IsZero()) {
					if tk.leads.IsZero() && standby.metric("nftguard_controller_leader") == 1 {
						tk.leads = time.Now()
					}
					if tk.published.IsZero() {
						l, err := a.admin.CoordinationV1().Leases(peerLease.ns).Get(context.Background(), peerLease.name, metav1.GetOptions{})
						if err == nil && l.Annotations[peerslice.AnnotationPublished] == standby.id {
							tk.writesPublished = standby.writes()
							tk.published = time.Now()
						}
					}
					if tk.flipped.IsZero() {
						// x/c -> x/a: n1 knows x/c only through its record.
						// Denied reads as a timeout, which the churn's load
						// can cause too: three in a row, the first's time.
						first := time.Now()
						denied := 0
						for ; denied < 3; denied++ {
							pctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
							ok, _ := a.lab.Probe(pctx, "x/c", "x/a", netlab.Port{Proto: netlab.TCP, Num: 80}, netlab.IPv4)
							cancel()
							if ok {
								break
							}
						}
						if denied == 3 {
							tk.flipped = first
						}
					}
					time.Sleep(20 * time.Millisecond)
				}
			})
		}
		a.runChurnWith(t, mid)
		watched.Wait()
		if tk.leads.IsZero() || tk.published.IsZero() || tk.flipped.IsZero() {
			t.Fatalf("within a minute of the SIGKILL: standby %s leads %v, published %v, x/c -> x/a:80 denied %v:\n%s",
				standby.id, !tk.leads.IsZero(), !tk.published.IsZero(), !tk.flipped.IsZero(), a.logs())
		}
		t.Logf("failover: standby %s leads %v after the SIGKILL (Lease %v), published %v after it (%v writes by then, %v in all after the churn)",
			standby.id, tk.leads.Sub(tk.killed).Round(time.Millisecond), labCtlLease, tk.published.Sub(tk.killed).Round(time.Millisecond),
			tk.writesPublished, standby.writes())
		if v := standby.metric("nftguard_controller_leader"); v != 1 {
			t.Errorf("the standby does not lead after the churn: %v", v)
		}
		want := a.failoverExpect()
		t.Logf("failover: the label change made while no controller led denied x/c -> x/a:80 (n3 -> n1) %v after it was made, %v after the SIGKILL",
			tk.flipped.Sub(labelChanged).Round(time.Millisecond), tk.flipped.Sub(tk.killed).Round(time.Millisecond))
		a.convergeFamilies(t, "after the failover and the churn", want)
		for _, n := range agentTopology {
			ag := a.agents[n.Name]
			waitFor(t, 30*time.Second, "agent "+n.Name+"'s records fresh", func() bool {
				return metricValue(ag.metrics(t), "nftguard_peer_records_stale") == 0
			})
		}
	})
}

// failoverExpect is the matrix TestAgentSlicesFailover's policies allow:
// x admits access=yes pods on port 80 (serve-80); y may reach access=yes
// pods on port 80 only.
func (a *agentLab) failoverExpect() func(from, to string, p netlab.Port) bool {
	access := map[string]bool{}
	for pod, l := range a.podLabels {
		access[pod] = l["access"] == "yes"
	}
	return func(from, to string, p netlab.Port) bool {
		if from == to {
			return true
		}
		if nsOf(to) == "x" && !(access[from] && p.Num == 80) {
			return false
		}
		if nsOf(from) == "y" && !(access[to] && p.Num == 80) {
			return false
		}
		return true
	}
}
