package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nftguard/nftguard/explain"
	"github.com/nftguard/nftguard/internal/netlab"
	"github.com/nftguard/nftguard/internal/testns"
	"github.com/nftguard/nftguard/manifest"
	"github.com/nftguard/nftguard/podset"
)

// TestExplainAgreesWithKernel runs every NetworkPolicy scenario and, after
// each apply, compares the real probe matrix with what the explain package
// says for every cell, reading the same manifest files that apply read.
// explain is an independent reading of the NetworkPolicy semantics, so an
// agreement cross-checks the compiler and the kernel, not the scenario's own
// expectation. The `nftguard explain` CLI is run for the cells of x/a's row
// and column on the first port, and must print the same verdict.
func TestExplainAgreesWithKernel(t *testing.T) {
	c := newCluster(t, false)
	runExplainScenarios(t, c, netlab.IPv4, nil)
}

// TestExplainAgreesWithKernelIPv6 does the same for the IPv6 subset.
func TestExplainAgreesWithKernelIPv6(t *testing.T) {
	c := newCluster(t, false)
	runExplainScenarios(t, c, netlab.IPv6, subset.MatchString)
}

func runExplainScenarios(t *testing.T, c *cluster, f netlab.Family, filter func(string) bool) {
	for _, sc := range scenarios(c) {
		if filter != nil && !filter(sc.name) {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			c.t = t
			c.reset()
			for _, st := range sc.steps {
				st.change(c)
				c.apply()
				ports := st.ports
				if len(ports) == 0 {
					ports = []netlab.Port{tcp80, tcp81}
				}
				explained := c.explainMatrix(f, ports)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				got, err := c.lab.Reachability(ctx, f, ports...)
				cancel()
				if err != nil {
					t.Fatalf("%s: probe: %v", st.name, err)
				}
				if diff := netlab.Compare(explained, got); diff != "" {
					t.Fatalf("%s: explain (expected) and the kernel (actual) disagree:\n%s\nrendered table:\n%s", st.name, diff, c.render())
				}
				c.explainCLI(f, ports[0], explained)
			}
		})
	}
}

// explainMatrix asks the explain package about every cell, reading the
// manifests apply just read.
func (c *cluster) explainMatrix(f netlab.Family, ports []netlab.Port) *netlab.Matrix {
	c.t.Helper()
	objs, problems, err := manifest.Load(nil, c.dir)
	if err != nil || len(problems) > 0 {
		c.t.Fatalf("load manifests: %v %v", err, problems)
	}
	cl, probs := explain.New(explain.Input{NodeName: c.node, Namespaces: objs.Namespaces, Nodes: objs.Nodes,
		Pods: podset.FromAPIList(objs.Pods), NetworkPolicies: objs.NetworkPolicies})
	if len(probs) > 0 {
		c.t.Fatalf("explain refused objects: %v", probs)
	}
	m := c.lab.NewExpected(f, false, ports...)
	for _, p := range m.Ports {
		for _, from := range m.From {
			for _, to := range m.To {
				r, err := cl.Explain(c.explainFlow(f, from, to, p))
				if err != nil {
					c.t.Fatalf("explain %s -> %s %v: %v", from, to, p, err)
				}
				m.Expect(from, to, r.Allowed, p)
			}
		}
	}
	return m
}

func (c *cluster) explainFlow(f netlab.Family, from, to string, p netlab.Port) explain.Flow {
	endpoint := func(name string) string {
		if strings.Contains(name, "/") {
			return name
		}
		return c.lab.Endpoint(name).Addr(f).String() // an external host
	}
	return explain.Flow{From: endpoint(from), To: endpoint(to), Protocol: corev1.Protocol(strings.ToUpper(string(p.Proto))),
		Port: int32(p.Num), Family: int(f)}
}

// explainCLI runs `nftguard explain` for x/a's row and column and checks
// that it prints the package's verdict and exits 0.
func (c *cluster) explainCLI(f netlab.Family, p netlab.Port, want *netlab.Matrix) {
	c.t.Helper()
	const pod = "x/a"
	var cells [][2]string
	for _, other := range want.To {
		cells = append(cells, [2]string{pod, other})
		if other != pod {
			cells = append(cells, [2]string{other, pod})
		}
	}
	for _, cell := range cells {
		fl := c.explainFlow(f, cell[0], cell[1], p)
		stdout, stderr, err := c.run("explain", "-f", c.dir, "--node-name", c.node, "--from", fl.From, "--to", fl.To,
			"--port", string(p.Proto)+"/"+strconv.Itoa(p.Num), "--family", strconv.Itoa(int(f)))
		if err != nil { // exit code 0 is required for denied flows too
			c.t.Fatalf("nftguard explain %s -> %s: %v\n%s%s", cell[0], cell[1], err, stdout, stderr)
		}
		verdict := "verdict: denied"
		if want.Allowed(cell[0], cell[1], p) {
			verdict = "verdict: allowed"
		}
		if !strings.Contains(stdout, verdict) {
			c.t.Fatalf("nftguard explain %s -> %s %v: want %q, got:\n%s", cell[0], cell[1], p, verdict, stdout)
		}
	}
}

// runCode runs the binary and returns stdout, stderr and the exit code.
func runCode(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(nftguardBin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	}
	t.Fatalf("run nftguard: %v", err)
	return "", "", -1
}

// TestExplainCLI checks the CLI contract of explain: the verdict lines, and
// exit code 0 for any verdict, 2 for bad input.
func TestExplainCLI(t *testing.T) {
	dir := t.TempDir()
	manifests := `
apiVersion: v1
kind: Namespace
metadata: {name: x, labels: {ns: x}}
---
apiVersion: v1
kind: Pod
metadata: {namespace: x, name: a, labels: {pod: a}}
spec: {nodeName: n1, containers: [{name: c, image: i, ports: [{name: http, containerPort: 8080}]}]}
status: {phase: Running, podIPs: [{ip: 10.1.0.2}]}
---
apiVersion: v1
kind: Pod
metadata: {namespace: x, name: b, labels: {pod: b}}
spec: {nodeName: n1, containers: [{name: c, image: i}]}
status: {phase: Running, podIPs: [{ip: 10.1.0.3}]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: x, name: allow-b}
spec:
  podSelector: {matchLabels: {pod: a}}
  ingress: [{from: [{podSelector: {matchLabels: {pod: b}}}], ports: [{port: http}]}]
`
	if err := os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(manifests), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"--from", "x/b", "--to", "x/a", "--port", "tcp/8080"}, 0, []string{
			"flow x/b (10.1.0.3) -> x/a (10.1.0.2) TCP/8080",
			"egress  x/b: allowed: not isolated for egress",
			"ingress x/a: allowed by x/allow-b ingress[0] (peer from[0] podSelector pod=b, port ports[0] TCP/http (8080 on x/a))",
			"verdict: allowed"}},
		{[]string{"--from", "x/b", "--to", "x/a", "--port", "tcp/80"}, 0, []string{
			"ingress x/a: denied: isolated by x/allow-b, no rule allowed", "verdict: denied"}},
		{[]string{"--from", "192.0.2.1", "--to", "10.1.0.2", "--port", "udp/8080"}, 0, []string{"egress  192.0.2.1: allowed: not a pod", "verdict: denied"}},
		{[]string{"--from", "x/nope", "--to", "x/a", "--port", "tcp/80"}, 2, []string{"unknown pod x/nope"}},
		{[]string{"--from", "x/b", "--to", "x/a", "--port", "tcp/http"}, 2, []string{"port must be a number"}},
		{[]string{"--from", "x/b", "--to", "x/a"}, 2, []string{"--port"}},
	} {
		args := append([]string{"explain", "-f", dir}, tt.args...)
		stdout, stderr, code := runCode(t, args...)
		if code != tt.code {
			t.Errorf("%v: exit %d, want %d\n%s%s", tt.args, code, tt.code, stdout, stderr)
		}
		for _, w := range tt.want {
			if !strings.Contains(stdout+stderr, w) {
				t.Errorf("%v: output lacks %q:\n%s%s", tt.args, w, stdout, stderr)
			}
		}
	}
}

// TestDoctorCLI checks doctor's exit codes and JSON output on namespaces of
// its own: 0 on a clean one, 1 with errors, 2 when it cannot inspect.
func TestDoctorCLI(t *testing.T) {
	clean := testns.New(t, "doccli")
	stdout, stderr, code := runCode(t, "doctor", "--netns", clean.Path, "-o", "json")
	if code != 0 {
		t.Fatalf("clean namespace: exit %d\n%s%s", code, stdout, stderr)
	}
	var rep struct {
		Findings []struct {
			Severity string `json:"severity"`
			Check    string `json:"check"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || len(rep.Findings) == 0 {
		t.Fatalf("json output: %v\n%s", err, stdout)
	}
	for _, f := range rep.Findings {
		if f.Severity != "info" {
			t.Errorf("clean namespace: %+v", f)
		}
	}

	bad := testns.New(t, "doccli")
	bad.MustExec(t, "table inet fw { chain fw_forward { type filter hook forward priority 0; policy drop; }; }\n", "nft", "-f", "-")
	stdout, stderr, code = runCode(t, "doctor", "--netns", bad.Path, "--probe=false")
	if code != 1 || !strings.Contains(stdout, "error   [hooks] inet fw chain fw_forward") {
		t.Errorf("policy drop on forward: exit %d, want 1\n%s%s", code, stdout, stderr)
	}

	_, stderr, code = runCode(t, "doctor", "--netns", "/nonexistent/netns")
	if code != 2 || !strings.Contains(stderr, "could not inspect") {
		t.Errorf("missing namespace: exit %d, want 2: %s", code, stderr)
	}
}

// TestDoctorCLIOwnTable checks `doctor -f` against our own table: exit 0 in
// sync; exit 1, naming the chain and rule, when the table holds an accept
// rule or a base chain the manifests do not (a table more open than they
// are); one inserted rule is one difference.
func TestDoctorCLIOwnTable(t *testing.T) {
	dir := t.TempDir()
	manifests := `
apiVersion: v1
kind: Namespace
metadata: {name: x}
---
apiVersion: v1
kind: Pod
metadata: {namespace: x, name: a, labels: {pod: a}}
spec: {nodeName: n1, containers: [{name: c, image: i}]}
status: {phase: Running, podIPs: [{ip: 10.1.0.2}]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {namespace: x, name: deny}
spec: {podSelector: {}}
`
	if err := os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(manifests), 0o644); err != nil {
		t.Fatal(err)
	}
	ns := testns.New(t, "doccli")
	apply := func() {
		t.Helper()
		if stdout, stderr, code := runCode(t, "apply", "-f", dir, "--netns", ns.Path, "--node-name", "n1"); code != 0 {
			t.Fatalf("apply: exit %d\n%s%s", code, stdout, stderr)
		}
	}
	doctor := func() (string, int) {
		t.Helper()
		stdout, stderr, code := runCode(t, "doctor", "-f", dir, "--netns", ns.Path, "--node-name", "n1", "--probe=false")
		return stdout + stderr, code
	}
	apply()
	if out, code := doctor(); code != 0 || !strings.Contains(out, "in sync with the manifests") {
		t.Fatalf("in sync: exit %d, want 0\n%s", code, out)
	}
	for _, tt := range []struct {
		name   string
		change []string
		want   []string
	}{
		{"inserted accept", []string{"insert", "rule", "inet", "nftguard", "np_ing_x_a", "accept"},
			[]string{"error   [nftguard] inet nftguard: more open than the manifests (1 of 1 differences", "chain np_ing_x_a: extra rule (handle", "): accept"}},
		{"extra base chain", []string{"add", "chain", "inet", "nftguard", "sneak", "{ type filter hook forward priority -5; policy accept; }"},
			[]string{"error   [nftguard] inet nftguard: more open than the manifests (1 of 1 differences", "extra base chain sneak"}},
	} {
		ns.MustExec(t, "", "nft", tt.change...)
		out, code := doctor()
		if code != 1 {
			t.Errorf("%s: exit %d, want 1\n%s", tt.name, code, out)
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", tt.name, w, out)
			}
		}
		apply() // repairs the table
		if out, code := doctor(); code != 0 {
			t.Fatalf("%s: after apply, exit %d, want 0\n%s", tt.name, code, out)
		}
	}
}
