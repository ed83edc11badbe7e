// Package e2e tests nftguard end to end: the built binary programs a node of
// a namespace lab from Kubernetes manifests, and real TCP, UDP and SCTP
// packets between pod namespaces check what the kernel enforces.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/internal/netlab"
)

// nftguardBin is the binary under test, built once by TestMain.
var nftguardBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nftguard-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	nftguardBin = filepath.Join(dir, "nftguard")
	// -trimpath as make image (hack/image) builds it: TestImage's build
	// of the image then finds every package compiled and only links.
	build := exec.Command("go", "build", "-trimpath", "-o", nftguardBin, "github.com/nftguard/nftguard/cmd/nftguard")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build nftguard: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// The upstream netpol e2e layout: namespaces x, y, z with pods a, b, c.
var (
	namespaces = []string{"x", "y", "z"}
	podNames   = []string{"a", "b", "c"}
	tcp80      = netlab.Port{Proto: netlab.TCP, Num: 80}
	tcp81      = netlab.Port{Proto: netlab.TCP, Num: 81}
	udp80      = netlab.Port{Proto: netlab.UDP, Num: 80}
	udp81      = netlab.Port{Proto: netlab.UDP, Num: 81}
	sctp80     = netlab.Port{Proto: netlab.SCTP, Num: 80}
	sctp81     = netlab.Port{Proto: netlab.SCTP, Num: 81}
)

func allPods() []string {
	var out []string
	for _, ns := range namespaces {
		for _, p := range podNames {
			out = append(out, ns+"/"+p)
		}
	}
	return out
}

// cluster is the Kubernetes state of one lab node, written as manifests and
// applied with the nftguard binary.
type cluster struct {
	t         *testing.T
	lab       *netlab.Lab
	node      string
	dir       string
	nsLabels  map[string]map[string]string
	podLabels map[string]map[string]string
	policies  map[string]*networkingv1.NetworkPolicy // namespace/name
	// lastApply is the stdout of the last apply (its sync statistics).
	lastApply string
}

func newCluster(t *testing.T, bridged bool) *cluster {
	t.Helper()
	lab := netlab.New(t, netlab.Spec{
		Nodes:   []netlab.NodeSpec{{Name: "n1", Pods: allPods()}},
		Bridged: bridged,
	})
	c := &cluster{t: t, lab: lab, node: "n1", dir: t.TempDir(),
		nsLabels: map[string]map[string]string{}, podLabels: map[string]map[string]string{},
		policies: map[string]*networkingv1.NetworkPolicy{}}
	c.reset()
	return c
}

// reset restores the initial labels and removes every policy.
func (c *cluster) reset() {
	for _, ns := range namespaces {
		c.nsLabels[ns] = map[string]string{"ns": ns}
	}
	for _, p := range allPods() {
		c.podLabels[p] = map[string]string{"pod": strings.Split(p, "/")[1]}
	}
	c.policies = map[string]*networkingv1.NetworkPolicy{}
}

func (c *cluster) addPolicy(np *networkingv1.NetworkPolicy) {
	c.policies[np.Namespace+"/"+np.Name] = np
}

func (c *cluster) deletePolicy(ns, name string) { delete(c.policies, ns+"/"+name) }

// objects builds the manifests: namespaces, pods with their lab addresses and
// the upstream named ports, and the policies.
func (c *cluster) objects() []any {
	var objs []any
	for _, ns := range namespaces {
		objs = append(objs, &corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: c.nsLabels[ns]},
		})
	}
	for _, name := range allPods() {
		ep := c.lab.Endpoint(name)
		ns, pn, _ := strings.Cut(name, "/")
		p := &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pn, Labels: c.podLabels[name]},
		}
		p.Spec.NodeName = c.node
		ct := corev1.Container{Name: "cont", Image: "agnhost"}
		for _, port := range []int32{80, 81} {
			for _, proto := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP} {
				ct.Ports = append(ct.Ports, corev1.ContainerPort{
					Name:          fmt.Sprintf("serve-%d-%s", port, strings.ToLower(string(proto))),
					ContainerPort: port, Protocol: proto})
			}
		}
		p.Spec.Containers = []corev1.Container{ct}
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIPs = []corev1.PodIP{{IP: ep.Addr(netlab.IPv4).String()}, {IP: ep.Addr(netlab.IPv6).String()}}
		p.Status.PodIP = p.Status.PodIPs[0].IP
		objs = append(objs, p)
	}
	keys := make([]string, 0, len(c.policies))
	for k := range c.policies {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		np := c.policies[k].DeepCopy()
		np.TypeMeta = metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"}
		objs = append(objs, np)
	}
	return objs
}

// apply writes the manifests and runs `nftguard apply` against the node.
func (c *cluster) apply() {
	c.t.Helper()
	list := map[string]any{"apiVersion": "v1", "kind": "List", "items": c.objects()}
	data, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.dir, "cluster.json"), data, 0o644); err != nil {
		c.t.Fatal(err)
	}
	stdout, stderr, err := c.run("apply", "-f", c.dir, "--netns", c.lab.Node(c.node).Path, "--node-name", c.node)
	if err != nil {
		c.t.Fatalf("nftguard apply: %v\nstdout: %s\nstderr: %s", err, stdout, stderr)
	}
	c.lastApply = stdout
}

func (c *cluster) run(args ...string) (string, string, error) {
	var out, errb bytes.Buffer
	cmd := exec.Command(nftguardBin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// allowedFunc says whether a probe from -> to on port should get through.
type allowedFunc func(from, to string, port netlab.Port) bool

// check probes the matrix and compares it with the expectation. A pod always
// reaches itself.
func (c *cluster) check(f netlab.Family, ports []netlab.Port, want allowedFunc) {
	c.t.Helper()
	c.compare(f, ports, want, "rendered table", c.render)
}

// compare probes the matrix and compares it with the expectation (a pod
// always reaches itself); a failure shows the table, table gives it.
func (c *cluster) compare(f netlab.Family, ports []netlab.Port, want allowedFunc, tableTitle string, table func() string) {
	c.t.Helper()
	exp := c.lab.NewExpected(f, false, ports...)
	for _, from := range exp.From {
		for _, to := range exp.To {
			for _, p := range ports {
				exp.Expect(from, to, from == to || want(from, to, p), p)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	got, err := c.lab.Reachability(ctx, f, ports...)
	if err != nil {
		c.t.Fatalf("probe: %v", err)
	}
	if diff := netlab.Compare(exp, got); diff != "" {
		c.t.Fatalf("%v connectivity differs from the expectation:\n%s\n%s:\n%s", f, diff, tableTitle, table())
	}
}

func (c *cluster) render() string {
	out, errOut, err := c.run("render", "-f", c.dir, "--node-name", c.node)
	if err != nil {
		return fmt.Sprintf("(render failed: %v: %s)", err, errOut)
	}
	return out
}

func nsOf(pod string) string { ns, _, _ := strings.Cut(pod, "/"); return ns }
