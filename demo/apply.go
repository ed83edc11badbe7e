package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/internal/netlab"
)

// demoPod is a pod of the demo and the port it serves.
type demoPod struct {
	name   string // namespace/name
	app    string
	port   string // container port name
	number int
}

var demoPods = []demoPod{
	{"frontend/web", "web", "http", 80},
	{"frontend/debug", "debug", "http", 80},
	{"backend/api", "api", "http", 8080},
	{"db/postgres", "postgres", "postgres", 5432},
}

var ports = []netlab.Port{{Proto: netlab.TCP, Num: 80}, {Proto: netlab.TCP, Num: 8080}, {Proto: netlab.TCP, Num: 5432}}

// runApply is `make demo-apply`: NetworkPolicies and ClusterNetworkPolicies
// applied from manifests with `nftguard apply`, on one node, no API server.
func runApply(ctx context.Context, out io.Writer, bin, examples string) error {
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("nftguard binary: %w (run `make build` first)", err)
	}
	var names []string
	for _, p := range demoPods {
		names = append(names, p.name)
	}
	fmt.Fprintln(out, "== building a node with 4 pods in throw-away network namespaces")
	lab, err := netlab.Create(netlab.Spec{Nodes: []netlab.NodeSpec{{Name: "node1", Pods: names}}, Ports: ports, Tag: labTag})
	if err != nil {
		return err
	}
	defer lab.Close()
	for _, p := range lab.Pods {
		fmt.Fprintf(out, "   %-15s %-12s %s\n", p.Name, p.IPv4, p.IPv6)
	}

	open, err := lab.Reachability(ctx, netlab.IPv4)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n== before: no policy, everyone reaches everyone (rows: from, columns: to; . allowed, X denied)\n%s\n", open)

	dir, err := os.MkdirTemp("", tempPrefix)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := writeManifests(dir, lab, examples); err != nil {
		return err
	}
	node := lab.Node("node1").Path
	fmt.Fprintf(out, "== nftguard apply -f %s (pods) -f %s --netns %s --node-name node1\n", filepath.Join(dir, "pods.json"), examples, node)
	got, err := applyAndProbe(ctx, out, bin, lab, dir, node)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n== after: the policies in %s are enforced\n%s\n", examples, got)
	if diff := netlab.Compare(expected(lab), got); diff != "" {
		return fmt.Errorf("enforced matrix differs from examples/README.md:\n%s", diff)
	}
	fmt.Fprintln(out, "   matches the expectation in examples/README.md")

	table, err := nftguard(ctx, bin, "render", "-f", dir, "--node-name", "node1")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n== the table nftguard programmed (nftguard render)\n%s\n", table)

	if err := clusterPolicies(ctx, out, bin, lab, dir, examples, got); err != nil {
		return err
	}

	stdout, err := nftguard(ctx, bin, "cleanup", "--netns", node)
	fmt.Fprintf(out, "== nftguard cleanup --netns %s\n%s", node, indent(stdout))
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "== removing the lab")
	return nil
}

// applyAndProbe runs nftguard apply of the manifests in dir on node1 (its
// output indented in out) and probes the lab's IPv4 matrix after it.
func applyAndProbe(ctx context.Context, out io.Writer, bin string, lab *netlab.Lab, dir, node string) (*netlab.Matrix, error) {
	stdout, err := nftguard(ctx, bin, "apply", "-f", dir, "--netns", node, "--node-name", "node1")
	fmt.Fprint(out, indent(stdout))
	if err != nil {
		return nil, err
	}
	return lab.Reachability(ctx, netlab.IPv4)
}

// clusterPolicies is the demo's second act: the administrator's
// ClusterNetworkPolicies of examples/cluster/ are added to the same input
// and applied (one incremental transaction). before is the matrix with the
// NetworkPolicies alone.
func clusterPolicies(ctx context.Context, out io.Writer, bin string, lab *netlab.Lab, dir, examples string, before *netlab.Matrix) error {
	src := filepath.Join(examples, "cluster")
	if err := copyYAML(src, filepath.Join(dir, "cluster"), "ClusterNetworkPolicy examples"); err != nil {
		return err
	}
	node := lab.Node("node1").Path
	fmt.Fprintf(out, "== nftguard apply -f %s (the same, plus %s: Admin Deny web -> backend, Baseline isolation) --netns %s --node-name node1\n", dir, src, node)
	got, err := applyAndProbe(ctx, out, bin, lab, dir, node)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n== after: ClusterNetworkPolicies around the NetworkPolicies\n%s\n", got)
	if netlab.Compare(expectedCluster(lab), got) == "" {
		fmt.Fprintln(out, "   matches the expectation in examples/README.md: the Admin Deny overrides the NetworkPolicy allow frontend/web -> backend/api:8080,")
		fmt.Fprintln(out, "   and Baseline isolation closes frontend, which no NetworkPolicy selects")
		return nil
	}
	return fmt.Errorf("enforced matrix with ClusterNetworkPolicies differs from examples/README.md:\n%s", netlab.Compare(expectedCluster(lab), got))
}

// expectedCluster is the matrix with examples/cluster/ added, as
// examples/README.md describes it.
func expectedCluster(lab *netlab.Lab) *netlab.Matrix {
	m := expected(lab)
	// Admin tier, before NetworkPolicy: web may not reach the backend.
	m.Expect("frontend/web", "backend/api", false)
	// Baseline tier, after NetworkPolicy: frontend's pods, which no
	// NetworkPolicy selects, accept nothing from other pods.
	m.ExpectTo("frontend/web", false)
	m.ExpectTo("frontend/debug", false)
	for _, p := range lab.Pods {
		m.Expect(p.Name, p.Name, true)
	}
	return m
}

// copyYAML copies the *.yaml files of a folder into another; what names
// the files in the error when there are none.
func copyYAML(from, to, what string) error {
	files, err := filepath.Glob(filepath.Join(from, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no %s in %s", what, from)
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, filepath.Base(f)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// expected is the matrix examples/README.md describes.
func expected(lab *netlab.Lab) *netlab.Matrix {
	m := lab.NewExpected(netlab.IPv4, true, ports...)
	// backend: default-deny ingress, api open to frontend/web on its named
	// port "http" (8080).
	m.ExpectTo("backend/api", false)
	m.Expect("frontend/web", "backend/api", true, netlab.Port{Proto: netlab.TCP, Num: 8080})
	// db: default-deny both ways, postgres open to backend/api on 5432.
	m.ExpectTo("db/postgres", false)
	m.ExpectFrom("db/postgres", false)
	m.Expect("backend/api", "db/postgres", true, netlab.Port{Proto: netlab.TCP, Num: 5432})
	// A pod always reaches itself.
	for _, p := range lab.Pods {
		m.Expect(p.Name, p.Name, true)
	}
	return m
}

// writeManifests writes the pods as the kubelet would report them (their lab
// addresses in status.podIPs) and copies the example policies beside them.
func writeManifests(dir string, lab *netlab.Lab, examples string) error {
	var items []any
	for _, dp := range demoPods {
		ep := lab.Endpoint(dp.name)
		ns, name, _ := strings.Cut(dp.name, "/")
		p := &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": dp.app}},
		}
		p.Spec.NodeName = "node1"
		p.Spec.Containers = []corev1.Container{{Name: dp.app, Image: dp.app,
			Ports: []corev1.ContainerPort{{Name: dp.port, ContainerPort: int32(dp.number), Protocol: corev1.ProtocolTCP}}}}
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIPs = []corev1.PodIP{{IP: ep.IPv4.String()}, {IP: ep.IPv6.String()}}
		items = append(items, p)
	}
	data, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": items}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "pods.json"), data, 0o644); err != nil {
		return err
	}
	return copyYAML(examples, dir, "example policies")
}

func nftguard(ctx context.Context, bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("nftguard %s: %w: %s", args[0], err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "   " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n   ") + "\n"
}
