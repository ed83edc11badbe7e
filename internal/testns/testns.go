// Package testns gives kernel tests a throw-away network namespace of their
// own, removed when the test ends, and runs the test-only oracle binaries
// (nft, iptables) inside it.
package testns

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/nftguard/nftguard/internal/kerneltest"
	"github.com/nftguard/nftguard/internal/nfnl"
)

// Prefix starts the name of every namespace this package creates, so that a
// crashed run's leftovers can be recognised and removed.
const Prefix = "ngt-"

// Dir is where named network namespaces are bind-mounted (as `ip netns` does).
const Dir = "/var/run/netns"

// NS is a named network namespace owned by one test.
type NS struct {
	Name string
	Path string
}

// New creates a fresh named namespace whose name starts with Prefix and tag,
// and removes it when the test ends (also when it fails). It is a kernel
// test's entry: without the kerneltest switch the test skips here.
func New(t testing.TB, tag string) *NS {
	t.Helper()
	kerneltest.Require(t)
	ns, err := Create(tag)
	if err != nil {
		t.Fatalf("create test namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := ns.Delete(); err != nil {
			t.Errorf("delete test namespace %s: %v", ns.Name, err)
		}
	})
	return ns
}

// Create makes a named namespace without tying it to a test (for benchmarks
// and demos); the caller must Delete it.
func Create(tag string) (*NS, error) {
	// A killed earlier run could not remove its namespaces: do it now
	// (see owner.go).
	if err := SweepStale(Prefix); err != nil {
		return nil, err
	}
	owner, err := Owner()
	if err != nil {
		return nil, err
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	name := Prefix + owner + "-" + tag + "-" + hex.EncodeToString(b[:])
	if err := createNamed(name); err != nil {
		return nil, err
	}
	return &NS{Name: name, Path: filepath.Join(Dir, name)}, nil
}

// createNamed makes the named namespace name under Dir.
func createNamed(name string) error {
	errc := make(chan error, 1)
	// netns.NewNamed switches the calling thread into the new namespace; do
	// it on a dedicated thread that is thrown away afterwards, so no other
	// goroutine ever runs inside it (why this is not nfnl.InNetNS: see the
	// nfnl package documentation).
	go func() {
		runtime.LockOSThread()
		origin, err := netns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer origin.Close()
		h, err := netns.NewNamed(name)
		if err != nil {
			errc <- fmt.Errorf("create namespace %s: %w", name, err)
			return
		}
		h.Close()
		if err := netns.Set(origin); err != nil {
			// Leave the thread locked: it dies with this goroutine
			// instead of serving others from the wrong namespace.
			errc <- fmt.Errorf("return to origin namespace: %w", err)
			return
		}
		runtime.UnlockOSThread()
		errc <- nil
	}()
	return <-errc
}

// Delete removes the namespace.
func (n *NS) Delete() error {
	return netns.DeleteNamed(n.Name)
}

// Run runs fn on a locked OS thread inside the namespace. Sockets created in
// fn stay bound to the namespace after it returns.
func (n *NS) Run(fn func() error) error {
	return RunIn(n.Path, fn)
}

// RunIn runs fn on a locked OS thread inside the namespace at path (see
// nfnl.InNetNS). It refuses the caller's own namespace: a test that meant
// its private one must never write to the host's.
func RunIn(path string, fn func() error) error {
	target, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("open namespace %s: %w", path, err)
	}
	defer target.Close()
	own, err := netns.GetFromPath("/proc/thread-self/ns/net")
	if err != nil {
		return err
	}
	defer own.Close()
	if target.Equal(own) {
		return fmt.Errorf("refusing to run in the caller's own namespace (%s)", path)
	}
	return nfnl.InNetNS(path, fn)
}

// Exec runs a test-only binary (nft, iptables-nft, ...) inside the namespace
// with stdin as its input, and returns its stdout. A missing binary is an
// error that says what to install: tests fail loudly, never skip.
func (n *NS) Exec(stdin string, name string, args ...string) (string, error) {
	bin, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s not found (install Debian packages nftables iptables iproute2 conntrack): %w", name, err)
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return "", fmt.Errorf("nsenter not found (Debian package util-linux): %w", err)
	}
	cmd := exec.Command(nsenter, append([]string{"--net=" + n.Path, "--", bin}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s in %s: %w: %s", name, strings.Join(args, " "), n.Name, err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// MustExec is Exec that fails the test on error.
func (n *NS) MustExec(t testing.TB, stdin string, name string, args ...string) string {
	t.Helper()
	out, err := n.Exec(stdin, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Leftovers lists namespaces under Dir whose names start with prefix.
func Leftovers(prefix string) ([]string, error) {
	ents, err := os.ReadDir(Dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Exec0 runs a binary in the caller's own namespace; tests use it only to
// read (never write) the host's state, to prove they left it untouched.
func Exec0(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return string(out), nil
}
