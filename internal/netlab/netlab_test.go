package netlab

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nftguard/nftguard/internal/kerneltest"
	"github.com/nftguard/nftguard/internal/testns"
)

// TestMain refuses to run without the tools the tests use as oracles: a
// missing tool is a failure that says what to install, never a skip.
// Without the kerneltest switch only the pure tests run (the others skip
// in New), so there is no host ruleset to guard.
func TestMain(m *testing.M) {
	if !kerneltest.Enabled() {
		os.Exit(m.Run())
	}
	var missing []string
	for tool, pkg := range map[string]string{"nft": "nftables", "nsenter": "util-linux"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, fmt.Sprintf("%s (Debian package %s)", tool, pkg))
		}
	}
	if p := kerneltest.Problem(); p != "" {
		missing = append(missing, p)
	}
	if len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: netlab tests need: %s\n", strings.Join(missing, ", "))
		os.Exit(1)
	}
	before, err := exec.Command("nft", "list", "ruleset").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: nft list ruleset: %v: %s\n", err, before)
		os.Exit(1)
	}
	code := m.Run()
	// The whole run, signal-handler children included, must leave the host
	// as it found it.
	after, err := exec.Command("nft", "list", "ruleset").CombinedOutput()
	if err != nil || !bytes.Equal(before, after) {
		fmt.Fprintf(os.Stderr, "FAIL: host ruleset changed (err %v):\nbefore:\n%s\nafter:\n%s\n", err, before, after)
		code = 1
	}
	owner, err := testns.Owner()
	left, lerr := Leftovers()
	for _, n := range left {
		if err == nil && strings.HasPrefix(n, Prefix+owner+"-") {
			fmt.Fprintf(os.Stderr, "FAIL: namespace %s left behind\n", n)
			code = 1
		}
	}
	if err != nil || lerr != nil {
		fmt.Fprintf(os.Stderr, "FAIL: list leftovers: %v %v\n", err, lerr)
		code = 1
	}
	os.Exit(code)
}

// hostRuleset returns the host's nft ruleset, read-only.
func hostRuleset(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("nft", "list", "ruleset").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list ruleset: %v: %s", err, out)
	}
	return string(out)
}

// newLab is New that also checks, when the test ends and after the lab's
// own cleanup, that the host ruleset is unchanged and that none of the lab's
// namespaces is left.
func newLab(t *testing.T, spec Spec) *Lab {
	t.Helper()
	kerneltest.Require(t) // before reading the host's ruleset
	before := hostRuleset(t)
	var id string
	t.Cleanup(func() { // cleanups run last-in first-out: after Close
		if id != "" {
			assertGone(t, id)
		}
		if after := hostRuleset(t); after != before {
			t.Errorf("host ruleset changed:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})
	l := New(t, spec)
	id = l.ID
	return l
}

// nftIn loads an nft script into a lab namespace with the nft binary (a
// test-only oracle: the product itself never shells out).
func nftIn(t *testing.T, l *Lab, name, script string) {
	t.Helper()
	path, err := l.PathOf(name)
	if err != nil {
		t.Fatal(err)
	}
	if path == "/proc/self/ns/net" || !strings.HasPrefix(path, NetNSDir+"/"+Prefix) {
		t.Fatalf("refusing to run nft outside a lab namespace: %s", path)
	}
	cmd := exec.Command("nsenter", "--net="+path, "--", "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("nft -f in %s: %v: %s", name, err, stderr.String())
	}
}

// xyz is the upstream netpol e2e layout: namespaces x, y, z with pods a, b, c.
var xyz = []string{"x/a", "x/b", "x/c", "y/a", "y/b", "y/c", "z/a", "z/b", "z/c"}

func reach(t *testing.T, l *Lab, f Family, ports ...Port) *Matrix {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	m, err := l.Reachability(ctx, f, ports...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v matrix of %d probes in %v", f, len(m.Ports)*len(m.From)*len(m.To), time.Since(start).Round(time.Millisecond))
	return m
}

func TestAllAllowed(t *testing.T) {
	for _, bridged := range []bool{false, true} {
		t.Run(topology(bridged), func(t *testing.T) {
			t.Parallel()
			l := newLab(t, Spec{Nodes: []NodeSpec{{Name: "n1", Pods: xyz}}, Bridged: bridged})
			sysctls := []string{"net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding"}
			if bridged {
				sysctls = append(sysctls, "net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables")
			}
			err := l.Run("n1", func() error {
				for _, k := range sysctls {
					v, err := os.ReadFile("/proc/sys/" + k)
					if err != nil {
						return err
					}
					if strings.TrimSpace(string(v)) != "1" {
						t.Errorf("node sysctl %s = %s, want 1", k, v)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []Family{IPv4, IPv6} {
				want := l.NewExpected(f, true)
				if diff := Compare(want, reach(t, l, f)); diff != "" {
					t.Fatal(diff)
				}
			}
		})
	}
}

func topology(bridged bool) string {
	if bridged {
		return "bridged"
	}
	return "routed"
}

func assertGone(t *testing.T, id string) {
	t.Helper()
	left, err := Leftovers()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range left {
		if strings.HasPrefix(n, Prefix+id) {
			t.Errorf("namespace %s left behind", n)
		}
	}
}
