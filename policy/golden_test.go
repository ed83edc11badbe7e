package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/apitest"
	"github.com/nftguard/nftguard/internal/golden"
	"github.com/nftguard/nftguard/internal/nftcheck"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/npset"
)

// The golden files under testdata/ are the tables Compile produces for
// fixed inputs, rendered as nft text after the input they came from. A
// change of behaviour shows up as a diff of these files: run
//
//	go test ./policy/ -run Golden -update
//
// and review the diff of testdata/ as part of the change.
var update = flag.Bool("update", false, "rewrite the golden files under testdata/ from the compiler's output")

// goldenRandomTexts is how many of randomCluster's clusters have their
// table as a golden text file: enough that every path of the compiler
// (duplicate keys, broken pods and policies, named ports, ipBlocks, shared
// selectors) is there to read many times, few enough that the files stay
// small (≈ 900 kB). The clusters of every seed up to -equiv.seeds are
// pinned by the SHA-256 of the same text in testdata/random.sum, which
// keeps the power of comparing thousands of clusters.
const goldenRandomTexts = 100

// goldenRandomSums is how many seeds -update records in random.sum.
const goldenRandomSums = 3000

// renderGolden renders an input and what Compile made of it: the input as
// comment lines, the problems, then the table as nft text.
func renderGolden(t *testing.T, in Input, out Output) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "# node %s\n", in.NodeName)
	for _, ns := range in.Namespaces {
		fmt.Fprintf(&b, "# namespace %s %s\n", ns.Name, labelText(ns.Labels))
	}
	for _, p := range podtest.List(in.Pods) {
		fmt.Fprintf(&b, "# pod %s/%s %s node=%q phase=%s hostNetwork=%v podIP=%q podIPs=%s ports=%s\n",
			p.Namespace, p.Name, labelText(p.Labels), p.Spec.NodeName, p.Status.Phase, p.Spec.HostNetwork,
			p.Status.PodIP, apitest.JSON(t, p.Status.PodIPs), portsText(p))
	}
	for _, np := range in.Policies.All() {
		fmt.Fprintf(&b, "# policy %s/%s %s\n", np.Namespace, np.Name, apitest.JSON(t, np.Spec))
	}
	for _, p := range out.Problems {
		fmt.Fprintf(&b, "# problem (%s) %s\n", p.APIVersion, p.Error())
	}
	text, err := engine.Render(engine.Table{Name: "nftguard"}, &engine.Desired{Chains: out.Chains, Sets: out.Sets})
	if err != nil {
		t.Fatal(err)
	}
	b.WriteString(text)
	return b.String()
}

func labelText(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + l[k]
	}
	return "{" + strings.Join(keys, ",") + "}"
}

func portsText(p *corev1.Pod) string {
	var out []string
	for _, cts := range [2][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cts {
			for _, cp := range c.Ports {
				out = append(out, fmt.Sprintf("%s:%s/%d", cp.Name, cp.Protocol, cp.ContainerPort))
			}
		}
	}
	return "[" + strings.Join(out, ",") + "]"
}

var equivSeeds = flag.Int("equiv.seeds", goldenRandomSums, "random clusters TestGoldenRandomClusters compares with their recorded tables")

// TestGoldenRandomClusters pins the compiled table of randomCluster's
// clusters (see goldenRandomTexts); TestCompilerEqualsCompileOnRandomChanges
// then carries that to the incremental Compiler over random event
// sequences.
func TestGoldenRandomClusters(t *testing.T) {
	n := *equivSeeds
	if testing.Short() {
		n = 300
	}
	if *update {
		n = goldenRandomSums
	}
	sumsPath := filepath.Join("testdata", "random.sum")
	want := golden.ReadSums(t, *update, sumsPath)
	var sums bytes.Buffer
	for seed := 0; seed < n; seed++ {
		in := randomCluster(rand.New(rand.NewSource(int64(seed))))
		out := Compile(in)
		if errs := nftcheck.Check(&engine.Desired{Chains: out.Chains, Sets: out.Sets}); len(errs) > 0 {
			t.Fatalf("seed %d: the kernel would refuse the compiled table: %v", seed, errs)
		}
		text := renderGolden(t, in, out)
		name := fmt.Sprintf("seed-%04d", seed)
		if seed < goldenRandomTexts {
			golden.Check(t, *update, filepath.Join("testdata", "random", name+".nft"), text)
		}
		sum := textSum(text)
		fmt.Fprintf(&sums, "%s %s\n", name, sum)
		if *update {
			continue
		}
		if w, ok := want[name]; !ok {
			t.Fatalf("%s: no recorded sum in %s (run with -update)", name, sumsPath)
		} else if w != sum {
			t.Errorf("%s: the compiled table differs from the recorded one (sum %s, recorded %s); if the change is intended, run with -update and review the diff of testdata/random/", name, sum, w)
		}
	}
	if *update {
		if err := os.WriteFile(sumsPath, sums.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGoldenAt10k pins the table of the benchmarks' 10k-pod clusters by
// its sum: their text is megabytes.
func TestGoldenAt10k(t *testing.T) {
	if testing.Short() {
		t.Skip("large")
	}
	path := filepath.Join("testdata", "big.sum")
	want := golden.ReadSums(t, *update, path)
	var sums bytes.Buffer
	for _, c := range []struct {
		name string
		in   Input
	}{{"bigCluster", bigCluster()}, {"selectingCluster", selectingCluster()}} {
		sum := textSum(renderGolden(t, c.in, Compile(c.in)))
		fmt.Fprintf(&sums, "%s %s\n", c.name, sum)
		if !*update && want[c.name] != sum {
			t.Errorf("%s: the compiled table differs from the recorded one (sum %s, recorded %s)", c.name, sum, want[c.name])
		}
	}
	if *update {
		if err := os.WriteFile(path, sums.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func textSum(text string) string {
	h := sha256.Sum256([]byte(text))
	return hex.EncodeToString(h[:])
}

// goldenScenarios are small clusters written by hand, one behaviour each.
func goldenScenarios() map[string]Input {
	xyz := []*corev1.Namespace{apitest.Namespace("x", "ns", "x"), apitest.Namespace("y", "ns", "y"), apitest.Namespace("z", "ns", "z")}
	allPeers := func(peers ...networkingv1.NetworkPolicyPeer) func(*networkingv1.NetworkPolicySpec) {
		return func(s *networkingv1.NetworkPolicySpec) {
			s.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: peers}}
			s.Egress = []networkingv1.NetworkPolicyEgressRule{{To: peers}}
		}
	}
	end := int32(90)
	sctp := corev1.ProtocolSCTP
	named := protoPort(corev1.ProtocolTCP, intstr.FromString("http"))
	return map[string]Input{
		"default-deny": {NodeName: "n1", Namespaces: xyz,
			Pods: podtest.Set([]*corev1.Pod{apitest.Pod("x", "a", "10.0.0.1"), apitest.Pod("x", "b", "10.0.0.2", apitest.OnNode("n2")), apitest.Pod("y", "a", "10.0.1.1", apitest.IPs("10.0.1.1", "fd00::101"))}),
			Policies: npset.New([]*networkingv1.NetworkPolicy{
				netpol("x", "deny", metav1.LabelSelector{}, nil),
				netpol("y", "deny-all", metav1.LabelSelector{}, func(s *networkingv1.NetworkPolicySpec) {
					s.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
				}),
			})},
		"selectors": {NodeName: "n1", Namespaces: xyz,
			Pods: podtest.Set([]*corev1.Pod{
				apitest.Pod("x", "a", "10.0.0.1"),
				apitest.Pod("x", "b", "10.0.0.2", apitest.OnNode("n2")),
				apitest.Pod("y", "a", "10.0.1.1", apitest.OnNode("n2")),
				apitest.Pod("y", "b", "10.0.1.2", apitest.OnNode("n2"), apitest.IPs("10.0.1.2", "fd00::102")),
				apitest.Pod("z", "b", "10.0.2.2", apitest.OnNode("n3")),
				apitest.Pod("nons", "c", "10.0.3.3", apitest.OnNode("n3")), // no Namespace object
			}),
			Policies: npset.New([]*networkingv1.NetworkPolicy{
				netpol("x", "pod", *apitest.Selector("pod", "a"), allPeers(networkingv1.NetworkPolicyPeer{PodSelector: apitest.Selector("pod", "b")})),
				netpol("x", "ns", *apitest.Selector("pod", "a"), allPeers(networkingv1.NetworkPolicyPeer{NamespaceSelector: apitest.Selector("ns", "y")})),
				netpol("x", "and", *apitest.Selector("pod", "a"), allPeers(networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: apitest.Selector("pod", "b")})),
				netpol("x", "or", *apitest.Selector("pod", "a"), allPeers(
					networkingv1.NetworkPolicyPeer{NamespaceSelector: apitest.Selector("ns", "z")},
					networkingv1.NetworkPolicyPeer{PodSelector: apitest.Selector("pod", "a")})),
				netpol("x", "notin", *apitest.Selector("pod", "a"), allPeers(networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "ns", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"x", "y"}}}}})),
				netpol("x", "metaname", *apitest.Selector("pod", "a"), allPeers(networkingv1.NetworkPolicyPeer{NamespaceSelector: apitest.Selector(corev1.LabelMetadataName, "nons")})),
				netpol("x", "nobody", *apitest.Selector("pod", "a"), allPeers(networkingv1.NetworkPolicyPeer{PodSelector: apitest.Selector("pod", "nobody")})),
			})},
		"ports": {NodeName: "n1",
			Pods: podtest.Set([]*corev1.Pod{
				apitest.Pod("x", "a", "10.0.0.1", apitest.Port("http", 8080, corev1.ProtocolTCP), apitest.Port("dns", 5353, corev1.ProtocolUDP)),
				apitest.Pod("x", "b", "10.0.0.2", apitest.Port("http", 9090, ""), apitest.IPs("10.0.0.2", "fd00::2")),
				apitest.Pod("x", "c", "10.0.0.3"),
			}),
			Policies: npset.New([]*networkingv1.NetworkPolicy{
				netpol("x", "in", metav1.LabelSelector{}, func(s *networkingv1.NetworkPolicySpec) {
					r80 := tcp(80)
					r80.EndPort = &end
					s.Ingress = []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{
						tcp(443), r80, {Protocol: &sctp}, named,
						protoPort(corev1.ProtocolUDP, intstr.FromString("dns")),
						protoPort(corev1.ProtocolUDP, intstr.FromString("http")), // http is TCP: no match
					}}}
				}),
				netpol("x", "out", *apitest.Selector("pod", "c"), func(s *networkingv1.NetworkPolicySpec) {
					s.Egress = []networkingv1.NetworkPolicyEgressRule{
						{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}, Ports: []networkingv1.NetworkPolicyPort{named, tcp(53)}},
						{Ports: []networkingv1.NetworkPolicyPort{named}}, // no peers: every pod's http
					}
				}),
			})},
		"ipblocks": {NodeName: "n1", Pods: podtest.Set([]*corev1.Pod{apitest.Pod("x", "a", "10.0.0.1")}),
			Policies: npset.New([]*networkingv1.NetworkPolicy{netpol("x", "p", metav1.LabelSelector{}, allPeers(
				networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "192.168.0.0/16", Except: []string{"192.168.1.0/24", "192.168.128.0/17"}}},
				networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "192.168.0.0/24"}},
				networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "2001:db8::/32", Except: []string{"2001:db8::/33"}}},
			))})},
		"not-enforced-and-invalid": {NodeName: "n1",
			Pods: podtest.Set([]*corev1.Pod{
				apitest.Pod("x", "done", "10.0.0.1", apitest.Phase(corev1.PodSucceeded)),
				apitest.Pod("x", "noip", "", apitest.IPs()),
				apitest.Pod("x", "host", "192.0.2.10", apitest.HostNetwork()),
				apitest.Pod("x", "live", "10.0.0.5"),
				apitest.Pod("x", "weird", "not-an-ip"),
			}),
			Policies: npset.New([]*networkingv1.NetworkPolicy{
				netpol("x", "p", metav1.LabelSelector{}, allPeers(networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}})),
				netpol("x", "bad", metav1.LabelSelector{}, func(s *networkingv1.NetworkPolicySpec) {
					s.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16", Except: []string{"10.1.0.0/24"}}}}}}
				}),
			})},
		"long-names": {NodeName: "n1",
			Pods: podtest.Set([]*corev1.Pod{apitest.Pod(strings.Repeat("n", 63), strings.Repeat("q", 253), "10.0.0.1")}),
			Policies: npset.New([]*networkingv1.NetworkPolicy{netpol(strings.Repeat("n", 63), strings.Repeat("p", 253), metav1.LabelSelector{},
				allPeers(networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{}}))})},
	}
}

func TestGoldenScenarios(t *testing.T) {
	for name, in := range goldenScenarios() {
		t.Run(name, func(t *testing.T) {
			golden.Check(t, *update, filepath.Join("testdata", name+".nft"), renderGolden(t, in, compileChecked(t, in)))
		})
	}
}
