package problemevents

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/problem"
)

func TestEventName(t *testing.T) {
	svc := problem.Object{APIVersion: "v1", Kind: "Service", Namespace: "x", Name: "web"}
	base := eventName(svc, "u1", ReasonCompileFailed, "bad", "")
	if again := eventName(svc, "u1", ReasonCompileFailed, "bad", ""); again != base {
		t.Errorf("the same problem is named %q and %q", base, again)
	}
	other := svc
	other.Kind = "NetworkPolicy"
	for what, name := range map[string]string{
		"message": eventName(svc, "u1", ReasonCompileFailed, "worse", ""),
		"node":    eventName(svc, "u1", ReasonCompileFailed, "bad", "n1"),
		"UID":     eventName(svc, "u2", ReasonCompileFailed, "bad", ""),
		"reason":  eventName(svc, "u1", ReasonQuarantined, "bad", ""),
		"kind":    eventName(other, "u1", ReasonCompileFailed, "bad", ""),
	} {
		if name == base {
			t.Errorf("another %s gives the same name %q", what, name)
		}
	}
	for _, n := range []string{"web", strings.Repeat("a", 253), "Upper.Case_odd", "-.-", "a." + strings.Repeat("b-", 120)} {
		name := eventName(problem.Object{Kind: "Pod", Name: n}, "", "r", "m", "")
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("object %q: event name %q is not a valid name: %v", n, name, errs)
		}
	}
}

// electionCluster is numNodes Nodes, and pods of namespace "x" on the
// first onX of them.
func electionCluster(numNodes, onX int) Cluster {
	var c Cluster
	var pods []*podset.Pod
	for i := range numNodes {
		name := fmt.Sprintf("node-%03d", i)
		c.Nodes = append(c.Nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		if i < onX {
			pods = append(pods, &podset.Pod{Namespace: "x", Name: fmt.Sprintf("p%d", i), NodeName: name, IPs: []string{fmt.Sprintf("10.0.%d.1", i)}})
		}
		// Pods no peer record is published for do not make their node a
		// voter: an agent reading PeerSlices would not know them.
		pods = append(pods, &podset.Pod{Namespace: "x", Name: fmt.Sprintf("pending%d", i), NodeName: name},
			&podset.Pod{Namespace: "x", Name: fmt.Sprintf("done%d", i), NodeName: name, IPs: []string{"10.1.0.1"}, Finished: true},
			&podset.Pod{Namespace: "x", Name: fmt.Sprintf("host%d", i), NodeName: name, IPs: []string{"192.168.0.1"}, HostNetwork: true})
	}
	c.Pods = podset.NewSet(pods)
	return c
}

// TestElection: every node decides alone, from the same caches, and for
// each object exactly k nodes find themselves reporters: among the nodes
// hosting a pod of its namespace, or among all Nodes when none does or the
// object is cluster-scoped.
func TestElection(t *testing.T) {
	const numNodes, onX, k = 40, 10, 3
	c := electionCluster(numNodes, onX)
	for _, tc := range []struct {
		ns, kind string
		voters   int // the first voters nodes may report
	}{{"x", "NetworkPolicy", onX}, {"empty", "NetworkPolicy", numNodes}, {"", "ClusterNetworkPolicy", numNodes}} {
		perNode := map[string]int{}
		const objects = 300
		for i := range objects {
			ref := problem.Object{APIVersion: "v1", Kind: tc.kind, Namespace: tc.ns, Name: fmt.Sprintf("o%d", i)}
			reporters := 0
			for _, n := range c.Nodes {
				e := electorate{node: n.Name, k: k}
				e.begin(c)
				if e.mine(ref, e.voters(ref)) {
					reporters++
					perNode[n.Name]++
				}
				e.end()
			}
			if reporters != k {
				t.Fatalf("%s %s/%s: %d reporters, want %d", tc.kind, tc.ns, ref.Name, reporters, k)
			}
		}
		for n, count := range perNode {
			var i int
			fmt.Sscanf(n, "node-%d", &i)
			if i >= tc.voters {
				t.Errorf("%s in %q: node %s, which is no voter, reports %d objects", tc.kind, tc.ns, n, count)
			}
		}
		// Rendezvous hashing spreads the work: no voter reports far more
		// than its share.
		fair := objects * k / tc.voters
		for n, count := range perNode {
			if count > 3*fair {
				t.Errorf("%s in %q: node %s reports %d objects, its share is %d", tc.kind, tc.ns, n, count, fair)
			}
		}
	}
}

// TestElectionNodeNotCached: a node whose own Node is not in the cache yet
// still votes among all Nodes.
func TestElectionNodeNotCached(t *testing.T) {
	e := electorate{node: "new", k: 3}
	e.begin(Cluster{Nodes: []*corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}}})
	ref := problem.Object{Kind: "ClusterNetworkPolicy", Name: "p"}
	if !e.mine(ref, e.voters(ref)) {
		t.Error("with two voters and three reporters, the uncached node does not report")
	}
}

func quietRecorder(t *testing.T, client *fake.Clientset, node string, k int) *Reporter {
	t.Helper()
	errors := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nftguard_errors_total"}, []string{"kind"})
	r, err := New(Config{Client: client, Node: node, Reporters: k, Registerer: prometheus.NewRegistry(), Errors: errors,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		UIDOf:  func(problem.Object) types.UID { return "uid-1" }})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRecordersShareOneEvent: two nodes report one problem; the second's
// create is refused as AlreadyExists, which is success, and is not retried;
// a node-local problem is reported by the node that has it even when it is
// not a reporter of the object's other problems; every node counts what it
// finds.
func TestRecordersShareOneEvent(t *testing.T) {
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := electionCluster(2, 2)
	bad := problem.Problem{Object: problem.Object{APIVersion: "v1", Kind: "Service", Namespace: "x", Name: "web"}, Reason: "bad annotation"}
	var recs []*Reporter
	for _, n := range []string{"node-000", "node-001"} {
		r := quietRecorder(t, client, n, 3)
		recs = append(recs, r)
		r.Report([]problem.Problem{bad}, nil, nil, nil, c)
		r.Report([]problem.Problem{bad}, nil, nil, nil, c) // a later sync: nothing new
		go r.Run(ctx)
	}
	events := func() []corev1.Event {
		list, err := client.CoreV1().Events("x").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	sent := func() (created, exists float64) {
		for _, r := range recs {
			created += testutil.ToFloat64(r.events.WithLabelValues(eventCreated))
			exists += testutil.ToFloat64(r.events.WithLabelValues(eventExists))
		}
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for created, exists := sent(); created+exists < 2; created, exists = sent() {
		if time.Now().After(deadline) {
			t.Fatalf("created %v, exists %v: want 1 and 1", created, exists)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if created, exists := sent(); created != 1 || exists != 1 {
		t.Errorf("created %v, exists %v: want 1 and 1", created, exists)
	}
	if evs := events(); len(evs) != 1 || evs[0].Message != bad.Error() || evs[0].InvolvedObject.UID != "uid-1" {
		t.Errorf("events %+v, want one about the problem", evs)
	}
	for _, r := range recs {
		if v := testutil.ToFloat64(r.errors.WithLabelValues(ErrorKindEvent)); v != 0 {
			t.Errorf("%s counted %v event errors", r.node, v)
		}
	}

	// One reporter of three: only it writes the object's problem, but a
	// Local problem is written by the node that found it.
	client = fake.NewClientset()
	c = electionCluster(10, 10)
	local := bad
	local.Reason, local.Local = "pod x/p1 is already translated", true
	wrote := 0
	for _, n := range c.Nodes {
		r := quietRecorder(t, client, n.Name, 1)
		r.Report([]problem.Problem{bad}, []problem.Problem{local}, nil, nil, c)
		wrote += len(r.q)
		if n.Name == "node-004" && len(r.q) == 0 {
			t.Error("node-004 did not report its own local problem")
		}
		// Every node logs and counts what it finds, reporter or not.
		if v := testutil.ToFloat64(r.errors.WithLabelValues(ErrorKindInvalidObject)); v != 1 {
			t.Errorf("%s counted %v invalid objects, want 1", n.Name, v)
		}
	}
	if wrote != 1+10 {
		t.Errorf("10 nodes queued %d events, want 1 for the object and 10 local ones", wrote)
	}
}
