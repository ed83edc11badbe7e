package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/internal/testns"
	"github.com/nftguard/nftguard/problemevents"
)

// apiPod is a pod the API server accepts, labelled app=NAMESPACE.
func apiPod(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": ns}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "agnhost"}}}}
}

// countingTransport counts the Event creates an agent sends.
type countingTransport struct {
	next    http.RoundTripper
	creates *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/events") {
		c.creates.Add(1)
	}
	return c.next.RoundTrip(r)
}

// TestEventsOncePerProblem runs three agents against the real API server
// and has a tenant write invalid egress Services and rewrite each three
// times with another bad value. Each distinct problem must become exactly
// one Event, however many agents find it (before: one per agent); the
// creates are bounded by the reporters per problem; a namespace whose pods
// are all on one node is reported by that node alone.
func TestEventsOncePerProblem(t *testing.T) {
	srv := kubetest.Start(t, kubetest.Options{})
	admin := kubernetes.NewForConfigOrDie(srv.Config(kubetest.Admin))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nodes := []string{"n1", "n2", "n3"}
	for _, n := range nodes {
		if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := kubetest.CreateNamespaces(ctx, admin, "t", "lone"); err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes {
		if _, err := kubetest.CreateRunningPod(ctx, admin, apiPod("t", "p-"+n, n), fmt.Sprintf("10.77.%d.2", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kubetest.CreateRunningPod(ctx, admin, apiPod("lone", "p", "n1"), "10.77.0.3"); err != nil {
		t.Fatal(err)
	}

	// Two reporters of three voters: the Event names deduplicate what
	// two agents write, the election keeps the third from writing.
	const reporters = 2
	creates := map[string]*atomic.Int64{}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for _, n := range nodes {
		ns := testns.New(t, "ev"+n)
		attachPod(t, ns, "vp0", fmt.Sprintf("10.77.%d.2", slices.Index(nodes, n)))
		if n == "n1" {
			attachPod(t, ns, "vp1", "10.77.0.3")
		}
		cfg := srv.Config(kubetest.Admin)
		creates[n] = &atomic.Int64{}
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt, creates[n]} }
		wg.Go(func() {
			err := Run(ctx, Config{REST: cfg, NodeName: n, NetNS: ns.Path, MetricsAddr: "0",
				MinSyncInterval: 10 * time.Millisecond, MaxSyncInterval: 100 * time.Millisecond, eventReporters: reporters,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Errorf("agent %s: %v", n, err)
			}
		})
	}

	const bad, rewrites, lone = 20, 3, 5
	write := func(ns, name, value string) {
		t.Helper()
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Annotations: map[string]string{"nftguard.io/egress": value}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
		old, err := admin.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			old.Annotations = s.Annotations
			_, err = admin.CoreV1().Services(ns).Update(ctx, old, metav1.UpdateOptions{})
		} else {
			_, err = admin.CoreV1().Services(ns).Create(ctx, s, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("write Service %s/%s: %v", ns, name, err)
		}
	}
	count := func(ns string) int {
		t.Helper()
		list, err := admin.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range list.Items {
			if e.Reason == problemevents.ReasonCompileFailed && e.InvolvedObject.Kind == "Service" {
				n++
			}
		}
		return n
	}
	waitFor := func(ns string, want int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for count(ns) < want {
			if time.Now().After(deadline) {
				t.Fatalf("%d Events in %s, want %d", count(ns), ns, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	start := time.Now()
	for round := 0; round <= rewrites; round++ {
		for i := range bad {
			write("t", fmt.Sprintf("bad-%d", i), fmt.Sprintf("maybe-%d", round))
		}
		// Every agent sees each round, so every problem is found by all
		// three: that is what used to multiply.
		waitFor("t", bad*(round+1))
	}
	for i := range lone {
		write("lone", fmt.Sprintf("bad-%d", i), "maybe")
	}
	waitFor("lone", lone)
	// Later syncs change nothing: give the agents a few, then count.
	for round := range 3 {
		p, err := admin.CoreV1().Pods("t").Get(ctx, "p-n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Labels["round"] = fmt.Sprint(round)
		if _, err := admin.CoreV1().Pods("t").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	time.Sleep(time.Second)

	problems := bad * (rewrites + 1)
	if got := count("t"); got != problems {
		t.Errorf("%d Events in t for %d distinct problems (3 agents), want %d", got, problems, problems)
	}
	if got := count("lone"); got != lone {
		t.Errorf("%d Events in lone, want %d", got, lone)
	}
	var total int64
	for _, n := range nodes {
		c := creates[n].Load()
		total += c
		// An agent sends at most one create per problem it reports: of
		// t's (all three are voters there), and n1 also of lone's.
		limit := int64(problems)
		if n == "n1" {
			limit += lone
		}
		if c > limit {
			t.Errorf("agent %s sent %d Event creates, more than its %d problems", n, c, limit)
		}
	}
	if max := int64(reporters*problems + lone); total > max {
		t.Errorf("%d Event creates in all, want at most %d", total, max)
	}
	t.Logf("%d distinct problems (%d Services × %d versions) + %d in a one-node namespace: %d Events, %d creates from 3 agents with %d reporters (before: one Event per agent and problem, %d), %v",
		problems, bad, rewrites+1, lone, count("t")+count("lone"), total, reporters, 3*(problems+lone), time.Since(start).Round(time.Millisecond))
	cancel()
}
