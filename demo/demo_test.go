package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nftguard/nftguard/internal/kerneltest"
)

// binDir holds the binaries the tests build once: nftguard, and the demo.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", tempPrefix+"test-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildNftguard builds the binary the demos run.
func buildNftguard(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(binDir, "nftguard")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	build := exec.Command("go", "build", "-o", bin, "github.com/nftguard/nftguard/cmd/nftguard")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// TestDemoApply runs `make demo-apply` end to end: it must succeed and show
// the enforced matrix and the programmed table.
func TestDemoApply(t *testing.T) {
	kerneltest.Require(t) // the demo builds a lab with netlab.Create
	bin := buildNftguard(t)
	var out bytes.Buffer
	if err := runApply(context.Background(), &out, bin, "../examples"); err != nil {
		t.Fatalf("demo failed: %v\noutput:\n%s", err, out.String())
	}
	want := []string{"before: no policy", "matches the expectation", "table inet nftguard {", "np_ing_backend_api", "removed",
		"after: ClusterNetworkPolicies around the NetworkPolicies"}
	want = append(want, "the Admin Deny overrides the NetworkPolicy allow")
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("demo output lacks %q:\n%s", w, out.String())
		}
	}
}

// TestDemoAgent runs `make demo` end to end against the real API server
// (the cached binaries of make k8sbins): the demo checks every fact it
// shows and fails otherwise; the test checks that the output tells them.
func TestDemoAgent(t *testing.T) {
	kerneltest.Require(t)
	bin := buildNftguard(t)
	var out bytes.Buffer
	start := time.Now()
	if err := runAgent(context.Background(), &out, agentOptions{bin: bin, deploy: "../deploy"}); err != nil {
		t.Fatalf("demo failed: %v\noutput:\n%s", err, out.String())
	}
	t.Logf("the demo took %v", time.Since(start).Round(time.Millisecond))
	text := out.String()
	for _, w := range []string{
		// The policy took effect, timed by the agent.
		"node1's agent had it in the kernel",
		"shop/frontend  -> shop/db port 5432: blocked",
		// The rule deleted by hand came back.
		"nft delete rule inet nftguard np_ing_shop_db handle",
		"the rule was back",
		// Egress: the outside host saw the Service's address, from node1
		// and after the move from node2; the held pod sent nothing with
		// its node's address.
		"shop/mailer-1  (node1) -> outside: outside saw 203.0.113.10, the Service's address",
		"shop/mailer-2  (node2) -> outside: nothing arrived: held",
		"shop/mailer-2  (node2) -> outside: outside saw 203.0.113.10.",
		"shop/mailer-1  (node1) -> outside, 3 tries: nothing arrived. Held on node1",
		"With node1's address 172.16.0.1: nothing.",
		// explain and explain-egress answer.
		"ingress shop/db: denied: isolated by shop/db-from-backend",
		"shop/mailer-2 (10.101.0.4) -> 172.16.0.2 tcp/80: leaves with 203.0.113.10",
		"shop/mailer-1 (10.100.0.3) -> 172.16.0.2 tcp/80: dropped (held)",
		// Clean-up, checked.
		"are as they were before the demo",
	} {
		if !strings.Contains(text, w) {
			t.Errorf("demo output lacks %q", w)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", text)
	}
}

// TestDemoInterrupt runs the demo as `make demo` does and interrupts it
// (SIGINT to the demo alone, so nothing else stops its children) once
// its agents run: it must stop them, the API server and etcd, and remove
// its namespaces and files before it exits.
func TestDemoInterrupt(t *testing.T) {
	kerneltest.Require(t)
	bin := buildNftguard(t)
	demo := filepath.Join(binDir, "demo")
	if out, err := exec.Command("go", "build", "-o", demo, ".").CombinedOutput(); err != nil {
		t.Fatalf("build the demo: %v\n%s", err, out)
	}
	cmd := exec.Command(demo, "-nftguard", bin, "-deploy", "../deploy")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	sc := bufio.NewScanner(stdout)
	interrupted := false
	for sc.Scan() {
		text.WriteString(sc.Text() + "\n")
		if !interrupted && strings.HasPrefix(sc.Text(), "== 1.") {
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			interrupted = true
		}
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 130 {
		t.Errorf("demo ended with %v, want exit status 130", err)
	}
	out := text.String()
	if !interrupted || !strings.Contains(out, "Interrupted.") || !strings.Contains(out, "are as they were before the demo") {
		t.Fatalf("output:\n%s\nstderr:\n%s", out, stderr.String())
	}
	dir := regexp.MustCompile(regexp.QuoteMeta(filepath.Join(os.TempDir(), tempPrefix)) + `[0-9]+`).FindString(out)
	lab := regexp.MustCompile(`ngl-[0-9.]+-` + labTag + `[0-9a-f]+`).FindString(out)
	if dir == "" || lab == "" {
		t.Fatalf("no temp dir or namespace named in the output:\n%s", out)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is still there (%v)", dir, err)
	}
	ents, err := os.ReadDir("/var/run/netns")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), lab) {
			t.Errorf("namespace %s is still there", e.Name())
		}
	}
	// The agents' kubeconfigs and the API server's and etcd's files were
	// in dir: a process naming it is one the demo left running.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(dir)) {
			t.Errorf("still running: %s", bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
}
