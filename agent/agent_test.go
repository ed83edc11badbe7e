package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/internal/testns"
)

// TestPreviousTableStaysUntilCachesSync starts the agent while the API
// server is down, over a table left by an earlier run: the table must stay
// untouched and /readyz must say not ready until the caches have synced;
// then one sync replaces it, and shutdown leaves the new table in place.
func TestPreviousTableStaysUntilCachesSync(t *testing.T) {
	srv := kubetest.Start(t, kubetest.Options{})
	ns := testns.New(t, "agent")
	ns.MustExec(t, "table inet nftguard {\n\tchain from_previous_run {\n\t}\n}\n", "nft", "-f", "-")
	srv.StopAPIServer()

	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{
			REST: srv.Config(kubetest.Admin), NodeName: "n1", NetNS: ns.Path,
			MetricsAddr: addr, MinSyncInterval: 10 * time.Millisecond, MaxSyncInterval: 50 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
	}()

	waitStatus(t, addr, "/healthz", http.StatusOK, 10*time.Second)
	time.Sleep(2 * time.Second)
	if code := status(addr, "/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d with the API server down, want 503", code)
	}
	if out := ns.MustExec(t, "", "nft", "list", "table", "inet", "nftguard"); !strings.Contains(out, "from_previous_run") {
		t.Fatalf("the previous table changed before the caches synced:\n%s", out)
	}

	if err := srv.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	// The reflectors retry with back-off, so allow for their next attempt.
	waitStatus(t, addr, "/readyz", http.StatusOK, 90*time.Second)
	out := ns.MustExec(t, "", "nft", "list", "table", "inet", "nftguard")
	if strings.Contains(out, "from_previous_run") {
		t.Fatalf("the first sync kept the previous run's chain:\n%s", out)
	}
	metrics := get(t, addr, "/metrics")
	for _, want := range []string{`nftguard_syncs_total{result="error"} 0`, `nftguard_syncs_total{result="success"} `, `nftguard_table_objects{kind="chains"}`, "process_resident_memory_bytes"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if after := ns.MustExec(t, "", "nft", "list", "table", "inet", "nftguard"); after != out {
		t.Fatalf("shutdown changed the table:\nbefore:\n%s\nafter:\n%s", out, after)
	}
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func status(addr, path string) int {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func waitStatus(t *testing.T, addr, path string, want int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for status(addr, path) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer %d within %v (last %d)", path, want, timeout, status(addr, path))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func get(t *testing.T, addr, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(fmt.Errorf("read %s: %w", path, err))
	}
	return string(b)
}

// TestWrongNodeNameWarns: an agent whose --node-name matches no pod says
// so in its log and in nftguard_node_without_pods, while a pod on the node
// clears it.
func TestWrongNodeNameWarns(t *testing.T) {
	srv := kubetest.Start(t, kubetest.Options{})
	ns := testns.New(t, "agentnn")
	addr := freeAddr(t)
	var logs syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{
			REST: srv.Config(kubetest.Admin), NodeName: "not-a-node", NetNS: ns.Path, MetricsAddr: addr,
			Logger: slog.New(slog.NewTextHandler(&logs, nil)), noPodsAfter: time.Second,
		})
	}()
	waitStatus(t, addr, "/readyz", http.StatusOK, 30*time.Second)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(get(t, addr, "/metrics"), "\nnftguard_node_without_pods 1\n") {
		if time.Now().After(deadline) {
			t.Fatalf("nftguard_node_without_pods not set; log:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "no pod is scheduled to this node") {
		t.Fatalf("no warning in the log:\n%s", logs.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
