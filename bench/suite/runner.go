package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nftguard/nftguard/internal/testns"
)

// tagPrefix starts the testns tag of every namespace this program makes;
// the creating pid follows it, so a later run can remove a crashed run's
// leftovers without touching namespaces of a live one.
const tagPrefix = "bs"

// runner carries what every scenario needs.
type runner struct {
	ctx  context.Context
	prof profile
	root string // repository root
	work string // scratch: the built binary, manifests
	bin  string // the nftguard binary under test
	tag  string // testns tag of this process
	log  io.Writer
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.log, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// inNS runs fn in a fresh namespace and removes it afterwards, also when
// fn fails.
func (r *runner) inNS(fn func(ns *testns.NS) error) (err error) {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	ns, err := testns.Create(r.tag)
	if err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	defer func() {
		if derr := ns.Delete(); derr != nil && err == nil {
			err = fmt.Errorf("delete namespace %s: %w", ns.Name, derr)
		}
	}()
	return fn(ns)
}

// buildBinary builds nftguard the way the Makefile does (static), so apply
// is timed as users run it.
func (r *runner) buildBinary() error {
	r.bin = filepath.Join(r.work, "nftguard")
	cmd := exec.CommandContext(r.ctx, "go", "build", "-o", r.bin, "./cmd/nftguard")
	cmd.Dir = r.root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build nftguard: %w\n%s", err, out)
	}
	return nil
}

// testJSON runs `go test` (args after "test") in dir, with the kernel
// switch and env, and decodes the JSON the test wrote to path into v:
// scenarios that need the API server harness, which runs only under
// testing, are measured by tests. It returns how long the test ran.
func (r *runner) testJSON(dir string, args, env []string, path, what string, v any) (time.Duration, error) {
	cmd := exec.CommandContext(r.ctx, "go", append([]string{"test"}, args...)...)
	cmd.Dir = dir
	// The tests need the kernel (network namespaces) and root, as the
	// suite does: without the switch they would skip and write nothing.
	cmd.Env = append(append(os.Environ(), "NFTGUARD_KERNEL_TESTS=1"), env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		return d, fmt.Errorf("go test %s: %w\n%s", strings.Join(args, " "), err, tail(string(out), 40))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return d, fmt.Errorf("%s test wrote no result: %w", what, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return d, fmt.Errorf("%s result: %w", what, err)
	}
	return d, nil
}

// timeCmd runs a command with stdin and returns its wall time.
func timeCmd(ctx context.Context, stdin string, name string, args ...string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return d, nil
}

// timeIn runs a test-only binary (nft, iptables-nft-*) inside ns through
// testns and returns its wall time.
func timeIn(ns *testns.NS, stdin, name string, args ...string) (time.Duration, error) {
	start := time.Now()
	if _, err := ns.Exec(stdin, name, args...); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// sweepStale removes namespaces left by earlier runs (of this program or
// any test) that died without cleaning up: their owner process is gone.
func sweepStale(log io.Writer) error {
	if err := testns.SweepStale(testns.Prefix); err != nil {
		return err
	}
	fmt.Fprintln(log, "removed stale test namespaces, if any")
	return nil
}
