package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/internal/netlab"
)

// guardDevices reads, from `nft list table inet nftguard`, the device of
// each pod's guard chain (pg_NS_POD → its ingress device).
func guardDevices(listing string) map[string]string {
	re := regexp.MustCompile(`(?m)^\s*chain (pg_[a-z0-9-]+_[a-z0-9-]+) \{\n(?:\s*comment "[^"]*"\n)?\s*type filter hook ingress device "([^"]+)"`)
	out := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(listing, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// checkGuards says whether every pod of the node has a guard chain on its
// own host-side veth, and no other pod guard chain exists.
func checkGuards(t *testing.T, listing string, pods []*netlab.Endpoint) {
	t.Helper()
	got := guardDevices(listing)
	for _, ep := range pods {
		ns, name, _ := strings.Cut(ep.Name, "/")
		chain := "pg_" + ns + "_" + name
		if dev, ok := got[chain]; !ok {
			t.Errorf("pod %s: no guard chain %s in the node's table", ep.Name, chain)
		} else if dev != ep.HostVeth {
			t.Errorf("pod %s: guard chain %s on device %s, want %s (its veth)", ep.Name, chain, dev, ep.HostVeth)
		}
		delete(got, chain)
	}
	if len(got) > 0 {
		t.Errorf("guard chains of no pod of this node: %v", got)
	}
	if t.Failed() {
		t.Logf("table:\n%s", listing)
	}
}

// `nftguard apply --netns` learns each pod's interface from the node's
// namespace, on a routed node (ptp veths with /32 and /128 routes) and on
// a bridged one (veth ports of br0): every pod is guarded on its own
// veth, as its output says and the kernel's table shows, and the pods
// still reach each other over both families (their own addresses and
// link-local neighbour discovery pass their guards). render, which reads
// no interface, has no guard chain.
func TestApplyLearnsPodInterfaces(t *testing.T) {
	for _, bridged := range []bool{false, true} {
		name := "routed"
		if bridged {
			name = "bridged"
		}
		t.Run(name, func(t *testing.T) {
			c := newCluster(t, bridged)
			c.apply()
			if want := "pods: 9 guarded on their interface, 0 unattributed"; !strings.Contains(c.lastApply, want) {
				t.Errorf("apply said:\n%s\nwant %q", c.lastApply, want)
			}
			node := c.lab.Node(c.node)
			checkGuards(t, nftList(t, node.NetNS), node.Pods)
			if r := c.render(); strings.Contains(r, "hook ingress") {
				t.Errorf("render has guard chains:\n%s", r)
			}
			ports := []netlab.Port{tcp80, udp81}
			c.check(netlab.IPv4, ports, all)
			c.check(netlab.IPv6, ports, all)
		})
	}
}

// `nftguard run` learns each pod's interface on routed and bridged nodes:
// every node's pods are guarded on their own veths (metrics and the
// table), none is unattributed. Then the node n3 loses its pods' veths (a
// network plugin nftguard cannot follow, as far as the agent can tell):
// the watch notices without any API change, both pods become
// unattributed, and one Warning Event on the Node says so. Last, one pod
// gets a new veth and then its address inside its own namespace: the
// agent hears of it only through the pod's namespace, and guards the pod
// on its new veth.
func TestAgentLearnsPodInterfaces(t *testing.T) {
	for _, bridged := range []bool{false, true} {
		name := "routed"
		if bridged {
			name = "bridged"
		}
		t.Run(name, func(t *testing.T) {
			a := newAgentLabWith(t, agentLabOptions{bridged: bridged})
			// Each lab node's uplink is a veth to the switch's
			// namespace too: an interface with a peer elsewhere, that
			// holds no pod's address and is nobody's.
			const uplink = 1
			for _, n := range a.lab.Nodes {
				ag := a.agents[n.Name]
				waitMetrics(t, ag, map[string]float64{
					"nftguard_pod_interfaces":    float64(len(n.Pods) + uplink),
					"nftguard_pods_guarded":      float64(len(n.Pods)),
					"nftguard_pods_unattributed": 0,
				})
				checkGuards(t, nftList(t, n.NetNS), n.Pods)
				if strings.Contains(ag.logTail(), "has no interface of its own") {
					t.Errorf("agent %s logged an unattributed pod:\n%s", n.Name, ag.logTail())
				}
			}

			n3 := a.lab.Node("n3")
			for _, ep := range n3.Pods {
				if out, err := exec.Command("ip", "-n", n3.NetNS, "link", "del", ep.HostVeth).CombinedOutput(); err != nil {
					t.Fatalf("delete %s: %v: %s", ep.HostVeth, err, out)
				}
			}
			ag := a.agents["n3"]
			waitMetrics(t, ag, map[string]float64{
				"nftguard_pod_interfaces":    uplink,
				"nftguard_pods_guarded":      0,
				"nftguard_pods_unattributed": float64(len(n3.Pods)),
			})
			if v := metricValue(ag.metrics(t), `nftguard_event_to_kernel_seconds_count{kind="PodInterface"}`); v < 1 {
				t.Errorf("no sync counted for a pod interface change (%v)", v)
			}
			ctx := context.Background()
			deadline := time.Now().Add(30 * time.Second)
			for {
				evs, err := a.admin.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node,involvedObject.name=n3"})
				if err != nil {
					t.Fatal(err)
				}
				if len(evs.Items) == 1 && strings.Contains(evs.Items[0].Message, "none of the node's pods has an interface of its own") {
					t.Logf("event on Node n3: %s: %s", evs.Items[0].Reason, evs.Items[0].Message)
					break
				}
				if len(evs.Items) > 1 || time.Now().After(deadline) {
					t.Fatalf("events on Node n3: %+v\n%s", evs.Items, ag.logTail())
				}
				time.Sleep(50 * time.Millisecond)
			}
			for _, ep := range n3.Pods {
				if !strings.Contains(ag.logTail(), `"pod":"`+ep.Name+`"`) {
					t.Errorf("agent n3 did not log pod %s as unattributed:\n%s", ep.Name, ag.logTail())
				}
			}

			// A new veth for the first pod, its side left down (no
			// carrier change, no link-local address): the agent sees
			// the veth, which holds no address yet, so the pod stays
			// unattributed. Then the pod's address is added inside the
			// pod's namespace, of which the node's namespace has no
			// event of its own: the watch hears it from the pod's
			// namespace, and the pod is guarded on its new veth
			// without any change in the API.
			ep := n3.Pods[0]
			if out, err := exec.Command("ip", "-n", n3.NetNS, "link", "add", ep.HostVeth, "type", "veth", "peer", "name", "eth0", "netns", ep.NetNS).CombinedOutput(); err != nil {
				t.Fatalf("recreate %s: %v: %s", ep.HostVeth, err, out)
			}
			waitMetrics(t, ag, map[string]float64{
				"nftguard_pod_interfaces":    uplink + 1,
				"nftguard_pods_guarded":      0,
				"nftguard_pods_unattributed": float64(len(n3.Pods)),
			})
			if out, err := exec.Command("ip", "-n", ep.NetNS, "addr", "add", ep.IPv4.String()+"/32", "dev", "eth0").CombinedOutput(); err != nil {
				t.Fatalf("address %s: %v: %s", ep.Name, err, out)
			}
			waitMetrics(t, ag, map[string]float64{
				"nftguard_pod_interfaces":    uplink + 1,
				"nftguard_pods_guarded":      1,
				"nftguard_pods_unattributed": float64(len(n3.Pods) - 1),
			})
			checkGuards(t, nftList(t, n3.NetNS), n3.Pods[:1])
		})
	}
}

// waitMetrics polls the agent's metrics until every series has its value.
func waitMetrics(t *testing.T, ag *agentProc, want map[string]float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		text := ag.metrics(t)
		ok := true
		for series, v := range want {
			if metricValue(text, series) != v {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for series, v := range want {
				fmt.Fprintf(&b, "%s = %v, want %v\n", series, metricValue(text, series), v)
			}
			t.Fatalf("agent %s metrics after 30s:\n%s%s", ag.node, b.String(), ag.logTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
