package egress

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/golden"
	"github.com/nftguard/nftguard/internal/nftcheck"
	"github.com/nftguard/nftguard/internal/podtest"
)

// The golden files under testdata/ are what Compile makes of randomCluster's
// clusters: the input as comment lines, the problems, warnings and
// bindings, then the table as nft text. A change of behaviour shows up as a
// diff of these files: run
//
//	go test ./egress/ -run Golden -update
//
// and review the diff of testdata/ as part of the change.
var update = flag.Bool("update", false, "rewrite the golden files under testdata/ from the compiler's output")

// goldenRandomTexts is how many of randomCluster's clusters have their
// output as a golden text file, to be read and diffed. Every seed up to
// goldenRandomSums is pinned by a sum of the same text in
// testdata/random.sum (the first 128 bits of its SHA-256: enough to notice
// any change, half the size of the whole hash).
const (
	goldenRandomTexts = 60
	goldenRandomSums  = 3000
)

// randomCluster is a small cluster of pods and annotated Services drawn from
// a few namespaces, apps, nodes and annotation values, so that Services
// often select the same pods, pods share addresses, annotations are bad,
// load-balancer addresses are missing or of one family only, and cluster
// CIDRs are sometimes missing.
func randomCluster(r *rand.Rand) Input {
	pick := func(vals ...string) string { return vals[r.Intn(len(vals))] }
	in := baseInput()
	if r.Intn(20) == 0 {
		in.ClusterCIDRs = nil
	}
	for i := r.Intn(30); i > 0; i-- {
		var ips []string
		switch r.Intn(5) {
		case 0:
		case 1:
			ips = []string{fmt.Sprintf("fd00:244::%x", r.Intn(30))}
		case 2:
			ips = []string{fmt.Sprintf("10.244.0.%d", r.Intn(30)), fmt.Sprintf("fd00:244::%x", r.Intn(30))}
		default:
			ips = []string{fmt.Sprintf("10.244.0.%d", r.Intn(30))}
		}
		p := pod(pick("a", "b", "c"), fmt.Sprintf("p%d", r.Intn(20)), pick("web", "db", "api"), pick("n1", "n1", "n2"), ips...)
		p.Spec.HostNetwork = r.Intn(10) == 0
		p.Status.Phase = []corev1.PodPhase{corev1.PodRunning, corev1.PodRunning, corev1.PodPending, corev1.PodFailed, corev1.PodSucceeded}[r.Intn(5)]
		if r.Intn(5) == 0 {
			p.Status.PodIP, p.Status.PodIPs = fmt.Sprintf("10.244.1.%d", r.Intn(30)), nil
		}
		in.Pods = podtest.Append(in.Pods, p)
	}
	for i := r.Intn(8); i > 0; i-- {
		ann := map[string]string{PrefixNftguard + AnnEgress: pick("true", "true", "true", "false", "yes")}
		if r.Intn(2) == 0 {
			ann[PrefixKubeVIP+AnnIPv6] = "true"
		}
		if r.Intn(3) == 0 {
			ann[PrefixNftguard+AnnDstPorts] = pick("tcp:443", "udp:53,tcp:80-90", "sctp:9000", "bogus")
		}
		if r.Intn(4) == 0 {
			ann[PrefixNftguard+AnnSrcPorts] = pick("tcp:1000-2000", "udp:53")
		}
		if r.Intn(4) == 0 {
			ann[PrefixNftguard+AnnAllowedNets] = pick("0.0.0.0/0", "8.8.8.0/24,2001:db8::/32", "2001:db8::/32")
		}
		if r.Intn(4) == 0 {
			ann[PrefixNftguard+AnnDeniedNets] = pick("1.1.1.0/24", "2001:db8:1::/48,9.9.9.9/32")
		}
		var lb []string
		switch r.Intn(4) {
		case 0:
		case 1:
			lb = []string{"192.0.2.1", "2001:db8::1"}
		default:
			lb = []string{fmt.Sprintf("192.0.2.%d", 1+r.Intn(5))}
		}
		s := svc(pick("a", "b", "c"), pick("web", "db", "api"), t0.Add(time.Duration(r.Intn(3))*time.Hour), ann, lb...)
		if r.Intn(10) == 0 {
			s.Spec.Selector = nil
		}
		in.Services = append(in.Services, s)
	}
	// Drawn after everything above, so that the clusters above stay the
	// clusters they were: some Services opt into node masquerade, and
	// some nodes hold only some of the addresses (as under kube-vip).
	for _, s := range in.Services {
		if r.Intn(5) == 0 {
			s.Annotations[PrefixNftguard+AnnNodeMasquerade] = "true"
		}
	}
	if r.Intn(3) == 0 {
		in.Local = &LocalAddrs{Prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/31"), netip.MustParsePrefix("192.0.2.3/32"), netip.MustParsePrefix("2001:db8::1/128")}}
	}
	return in
}

// renderGolden renders an input and what Compile made of it.
func renderGolden(t *testing.T, in Input, out Output) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "# node %s cluster %v service %v node addresses %v\n", in.NodeName, in.ClusterCIDRs, in.ServiceCIDRs, in.NodeIPs)
	if in.Local != nil {
		fmt.Fprintf(&b, "# local addresses %v\n", in.Local.Prefixes)
	}
	for _, p := range podtest.List(in.Pods) {
		var ips []string
		for _, ip := range p.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		fmt.Fprintf(&b, "# pod %s/%s %s node=%s phase=%s hostNetwork=%v podIP=%q podIPs=%v\n",
			p.Namespace, p.Name, mapText(p.Labels), p.Spec.NodeName, p.Status.Phase, p.Spec.HostNetwork, p.Status.PodIP, ips)
	}
	for _, s := range in.Services {
		var lb []string
		for _, ing := range s.Status.LoadBalancer.Ingress {
			lb = append(lb, ing.IP)
		}
		fmt.Fprintf(&b, "# service %s/%s created=%s type=%s selector=%s annotations=%s lb=%v\n",
			s.Namespace, s.Name, s.CreationTimestamp.UTC().Format(time.RFC3339), s.Spec.Type, mapText(s.Spec.Selector), mapText(s.Annotations), lb)
	}
	for _, p := range out.Problems {
		fmt.Fprintf(&b, "# problem (%s) %s\n", p.APIVersion, p.Error())
	}
	for _, p := range out.Warnings {
		fmt.Fprintf(&b, "# warning (%s) %s\n", p.APIVersion, p.Error())
	}
	addrs := make([]netip.Addr, 0, len(out.Bindings))
	for a := range out.Bindings {
		addrs = append(addrs, a)
	}
	sort.Slice(addrs, func(i, j int) bool { return addrs[i].Less(addrs[j]) })
	for _, a := range addrs {
		bd := out.Bindings[a]
		fmt.Fprintf(&b, "# binding %s -> %s restricted=%v\n", a, bd.To, bd.Restricted)
	}
	for _, h := range out.Held {
		fmt.Fprintf(&b, "# held %s (%s, %s)\n", h.Addr, h.Service, h.Reason)
	}
	for _, p := range out.Pending {
		fmt.Fprintf(&b, "# pending %s\n", p)
	}
	if len(out.Chains)+len(out.Sets) == 0 {
		b.WriteString("# no table\n")
		return b.String()
	}
	text, err := engine.Render(engine.Table{Name: "nftguard"}, &engine.Desired{Chains: out.Chains, Sets: out.Sets})
	if err != nil {
		t.Fatal(err)
	}
	b.WriteString(text)
	return b.String()
}

func mapText(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + m[k]
	}
	return "{" + strings.Join(keys, ",") + "}"
}

// TestGoldenRandomClusters pins Compile's output for randomCluster's
// clusters: the first goldenRandomTexts as text under testdata/random/, all
// goldenRandomSums by their sums in testdata/random.sum.
func TestGoldenRandomClusters(t *testing.T) {
	checkRandomGoldens(t, Compile)
}

func checkRandomGoldens(t *testing.T, compile func(Input) Output) {
	n := goldenRandomSums
	if testing.Short() {
		n = 300
	}
	sumsPath := filepath.Join("testdata", "random.sum")
	want := golden.ReadSums(t, *update, sumsPath)
	var sums bytes.Buffer
	var nChains, nBindings, nWarnings int
	for seed := 0; seed < n; seed++ {
		in := randomCluster(rand.New(rand.NewSource(int64(seed))))
		out := compile(in)
		if errs := nftcheck.Check(&engine.Desired{Chains: out.Chains, Sets: out.Sets}); len(errs) > 0 {
			t.Fatalf("seed %d: the kernel would refuse the compiled table: %v", seed, errs)
		}
		nChains += len(out.Chains)
		nBindings += len(out.Bindings)
		nWarnings += len(out.Warnings)
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
			t.Errorf("%s: the compiled output differs from the recorded one (sum %s, recorded %s); if the change is intended, run with -update and review the diff of testdata/random/", name, sum, w)
		}
	}
	t.Logf("%d clusters: chains %d, bindings %d, warnings %d", n, nChains, nBindings, nWarnings)
	if *update {
		if err := os.WriteFile(sumsPath, sums.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func textSum(text string) string {
	h := sha256.Sum256([]byte(text))
	return hex.EncodeToString(h[:16])
}
