package agent

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gauge reads one unlabelled gauge from the agent's registry.
func gauge(t *testing.T, m *metrics, name string) float64 {
	t.Helper()
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestNoLocalPodsWarns: a node without pods for longer than the limit gets
// one warning and the gauge; a pod arriving clears it.
func TestNoLocalPodsWarns(t *testing.T) {
	m := newMetrics()
	var logs syncBuffer
	var pods atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchLocalPods(ctx, func() (int, bool) { return int(pods.Load()), true }, 200*time.Millisecond, m, slog.New(slog.NewTextHandler(&logs, nil)))
	}()
	wait := func(want float64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for gauge(t, m, "nftguard_node_without_pods") != want {
			if time.Now().After(deadline) {
				t.Fatalf("nftguard_node_without_pods stays %v, want %v; logs:\n%s", gauge(t, m, "nftguard_node_without_pods"), want, logs.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait(1)
	if n := strings.Count(logs.String(), "no pod is scheduled to this node"); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, logs.String())
	}
	time.Sleep(300 * time.Millisecond)
	if n := strings.Count(logs.String(), "no pod is scheduled to this node"); n != 1 {
		t.Fatalf("warned again while nothing changed:\n%s", logs.String())
	}
	pods.Store(3)
	wait(0)
	if got := gauge(t, m, "nftguard_local_pods"); got != 3 {
		t.Fatalf("nftguard_local_pods = %v, want 3", got)
	}
	cancel()
	<-done
}
