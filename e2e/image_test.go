package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/nftguard/nftguard/internal/childproc"
	"github.com/nftguard/nftguard/internal/kerneltest"
	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/internal/netlab"
	"github.com/nftguard/nftguard/internal/testns"
	"github.com/nftguard/nftguard/peerslice"
)

// The service account deploy/rbac.yaml creates, as the API server names
// its requests.
const (
	agentSANamespace = "kube-system"
	agentSAName      = "nftguard"
	agentSAUser      = "system:serviceaccount:" + agentSANamespace + ":" + agentSAName
	// Where client-go's in-cluster configuration reads the token and CA.
	saMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"
)

var imageColdStarts = flag.Int("image.coldstarts", 1, "TestImage: how many cold starts of the agent on the host and in a container to measure (the median is logged)")

// imageTopology is one node with a pod in each of x and y: enough for a
// policy that isolates x and a rule that lets y in.
var imageTopology = []netlab.NodeSpec{{Name: "n1", Pods: []string{"x/a", "x/b", "y/a"}}}

// TestDeployManifests holds deploy/ together without an API server: the
// kustomize base lists every manifest of the directory, the DaemonSet and
// the cleanup Job name the release in VERSION (never latest). TestImage
// dry-runs them against the real API server.
func TestDeployManifests(t *testing.T) {
	version := readVersion(t)
	base := readKustomization(t)
	entries, err := os.ReadDir(filepath.Join("..", "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".yaml") && e.Name() != "kustomization.yaml" {
			files = append(files, e.Name())
		}
	}
	slices.Sort(files)
	listed := slices.Sorted(slices.Values(base.Resources))
	if !slices.Equal(files, listed) {
		t.Errorf("deploy/kustomization.yaml lists %v, deploy/ has %v: every manifest belongs to the base", listed, files)
	}
	want := "ghcr.io/nftguard/nftguard:" + version
	ds := readDaemonSet(t)
	if got := ds.Spec.Template.Spec.Containers[0].Image; got != want {
		t.Errorf("deploy/daemonset.yaml runs %s, want %s (the VERSION file)", got, want)
	}
	data, err := os.ReadFile(filepath.Join("..", "deploy", "cleanup", "job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("image: "+want+"\n")) {
		t.Errorf("deploy/cleanup/job.yaml does not run %s", want)
	}
	if data, err = os.ReadFile(filepath.Join("..", "deploy", "controller.yaml")); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("image: "+want+"\n")) {
		t.Errorf("deploy/controller.yaml does not run %s", want)
	}
	// The CRD an operator installs is the one the code and the tests use.
	if data, err = os.ReadFile(filepath.Join("..", "deploy", "crd.yaml")); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, peerslice.CRD()) {
		t.Errorf("deploy/crd.yaml differs from peerslice/crd.yaml: copy it (cp peerslice/crd.yaml deploy/crd.yaml)")
	}
}

// TestImage builds the image as `make image` does (for this machine's
// architecture, twice: the same commit must give the same digest), loads
// it into podman, and runs it as deploy/daemonset.yaml runs it: every
// capability dropped but NET_ADMIN, read-only root, default seccomp, no
// privilege escalation, the memory limit, the network namespace of a lab
// node as its host network, and in-cluster configuration from a real
// service-account token of deploy/rbac.yaml's ServiceAccount. Then it
// must become ready, enforce a NetworkPolicy on real packets, follow a
// change, keep its table while stopped and pick up after a restart, get no
// Forbidden, and ask the API server for exactly what its ClusterRole and
// its Role grant. deploy/crd.yaml and deploy/controller.yaml are applied
// and `nftguard controller` runs (the binary on the host, as a user bound
// to the controller's roles), so the agent's default --peer-source auto
// reads PeerSlices and the controller's Lease, as in a cluster with the
// whole of deploy/. Last, deploy/cleanup/job.yaml's container removes the table and
// leaves another tool's. The host's ruleset and forwarding sysctls must be
// as before.
func TestImage(t *testing.T) {
	kerneltest.Require(t)
	for _, tool := range []string{"podman", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (%v): TestImage runs the image under podman with runc; make deps installs both (DEB_PKGS)", tool, err)
		}
	}
	// Registered first, so it runs last: after every container, the
	// podman storage and the lab are gone.
	before := snapshotHost(t)
	t.Cleanup(func() {
		if after := snapshotHost(t); after != before {
			t.Errorf("the host changed:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})

	img := buildImage(t)
	pm := newPodman(t)
	ref := pm.load(t, img.archive)
	if ref != img.ref {
		t.Fatalf("podman load named the image %q, want %q", ref, img.ref)
	}
	t.Logf("image %s: archive %d bytes, layer (gzip) %d bytes, the binary in it %d bytes", img.ref, img.archiveSize, img.layerSize, img.binarySize)

	ds := readDaemonSet(t)
	ulimits := currentUlimits(t)

	t.Run("same layout as the Dockerfile", func(t *testing.T) { checkDockerfile(t, img) })

	t.Run("version", func(t *testing.T) {
		out := pm.mustRun(t, append(append([]string{"run", "--rm", "--network", "none"}, ulimits...), img.ref, "version")...)
		if !strings.Contains(out, "nftguard "+img.version+" revision "+img.revision) {
			t.Errorf("nftguard version in the image says %q, want version %s and revision %s (the image's annotations)", out, img.version, img.revision)
		}
	})

	a := newAgentLabWith(t, agentLabOptions{topology: imageTopology, noAgents: true, audit: true, peerSource: "auto"})
	ctx := context.Background()
	adminCfg := a.srv.Config(kubetest.Admin)
	node := a.lab.Node("n1")

	t.Run("server-side dry run of deploy/", func(t *testing.T) {
		for _, f := range append(readKustomization(t).Resources, "cleanup/job.yaml") {
			data, err := os.ReadFile(filepath.Join("..", "deploy", f))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kubetest.Apply(ctx, adminCfg, data, true); err != nil {
				t.Errorf("deploy/%s: %v", f, err)
			}
		}
	})

	// The agent watches ClusterNetworkPolicies when their CRD is served:
	// install it so that the audit sees every watch the agent has.
	if err := kubetest.InstallCNPCRD(ctx, adminCfg, "standard"); err != nil {
		t.Fatal(err)
	}
	// The controller publishes the peer records: the agent's default
	// (auto) then reads PeerSlices and gets the controller's Lease, and
	// the audit below sees those requests too.
	a.deployController(t)
	a.startController(t)
	a.waitPublished(t)
	sa := writeServiceAccount(ctx, t, a)
	relayPort := relayInto(t, node.Path, strings.TrimPrefix(a.srv.Host, "https://"))

	name := "img-agent-" + a.lab.ID
	runArgs, probes, err := daemonSetRunArgs(ds, "n1")
	if err != nil {
		t.Fatalf("deploy/daemonset.yaml: %v", err)
	}
	client := nsHTTPClient(node.Path)
	// startContainer runs the DaemonSet's container as name and returns
	// how long it took from podman run until /readyz answered 200.
	startContainer := func(name string) time.Duration {
		t.Helper()
		args := append([]string{"run", "-d", "--name", name, "--network", "ns:" + node.Path,
			"--volume", sa.dir + ":" + saMountPath + ":ro",
			"--env", "KUBERNETES_SERVICE_HOST=127.0.0.1", "--env", "KUBERNETES_SERVICE_PORT=" + strconv.Itoa(relayPort)}, ulimits...)
		args = append(append(args, runArgs.flags...), img.ref)
		args = append(args, runArgs.args...)
		start := time.Now()
		pm.mustRun(t, args...)
		// Gone before the lab's namespaces are (cleanups run last first).
		t.Cleanup(func() { pm.run("rm", "--force", "--time", "0", name) })
		return waitReadyz(t, client, probes.readiness, start, func() string { return pm.state(name) },
			func() string { return "--- container log (tail) ---\n" + tailString(pm.logs(name), 6000) })
	}

	// Cold start to ready, the same binary on the host against the image
	// in a container: the same node, token and API server, each from an
	// empty table (the container started last is removed with its table).
	if *imageColdStarts < 1 {
		t.Fatalf("-image.coldstarts %d: at least one", *imageColdStarts)
	}
	var onHost, inContainer []time.Duration
	for i := range *imageColdStarts {
		onHost = append(onHost, coldStartOnHost(t, a, sa))
		cold := fmt.Sprintf("%s-cold%d", name, i)
		inContainer = append(inContainer, startContainer(cold))
		pm.mustRun(t, "rm", "--force", "--time", "20", cold)
		if out, err := exec.Command(nftguardBin, "cleanup", "--netns", node.Path).CombinedOutput(); err != nil {
			t.Fatalf("nftguard cleanup: %v: %s", err, out)
		}
	}
	h, c := median(onHost), median(inContainer)
	t.Logf("cold start to ready, median of %d: binary on the host %v, in the container %v (podman run included): ratio %.2f (host %v, container %v)",
		len(onHost), h.Round(time.Millisecond), c.Round(time.Millisecond), float64(c)/float64(h), roundAll(onHost), roundAll(inContainer))

	a.extraLogs = func() string { return "--- container log (tail) ---\n" + tailString(pm.logs(name), 6000) }
	startContainer(name)
	t.Run("liveness", func(t *testing.T) {
		resp, err := client.Get(probes.liveness)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %s", probes.liveness, resp.Status)
		}
	})

	t.Run("auto reads PeerSlices", func(t *testing.T) {
		resp, err := client.Get(strings.Replace(probes.readiness, "/readyz", "/metrics", 1))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if v := metricValue(string(b), `nftguard_peer_source{source="slices"}`); v != 1 {
			t.Errorf(`nftguard_peer_source{source="slices"} = %v in the container, want 1:\n%s`, v, tailString(pm.logs(name), 6000))
		}
		if v := metricValue(string(b), "nftguard_peer_records_stale"); v != 0 {
			t.Errorf("nftguard_peer_records_stale = %v in the container, want 0", v)
		}
	})

	t.Run("security context and limits", func(t *testing.T) { checkContainerSecurity(t, pm, name, ds) })

	// With NET_ADMIN alone the agent cannot hear the pods' own namespaces
	// (that takes CAP_NET_BROADCAST): it says so once, polls instead, and
	// guards every pod of the node on its interface all the same.
	t.Run("pod interfaces with NET_ADMIN alone", func(t *testing.T) {
		metricsURL := strings.Replace(probes.readiness, "/readyz", "/metrics", 1)
		want := len(node.Pods)
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			resp, err := client.Get(metricsURL)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			text := string(b)
			if metricValue(text, "nftguard_pod_interface_watch_errors_total") != 0 {
				t.Fatalf("the pod interface watch fails in the container:\n%s", tailString(pm.logs(name), 6000))
			}
			if metricValue(text, "nftguard_pods_guarded") == float64(want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("nftguard_pods_guarded %v, want %d\n%s", metricValue(text, "nftguard_pods_guarded"), want, tailString(pm.logs(name), 6000))
			}
		}
		if l := pm.logs(name); !strings.Contains(l, "cannot be watched") || strings.Contains(l, "pod interface watch failed") {
			t.Errorf("the container's log does not say once that pod namespaces are polled:\n%s", tailString(l, 6000))
		}
	})

	want := a.expect(ctx)
	t.Run("baseline", func(t *testing.T) {
		a.converge(t, "no policies", "y/a", "x/a", agentPorts[0], true, want, 0)
	})
	a.createPolicy(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "deny-ingress"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	})
	t.Run("NetworkPolicy enforced", func(t *testing.T) {
		want = a.expect(ctx)
		a.converge(t, "deny-ingress", "y/a", "x/a", agentPorts[0], false, want, 0)
	})
	port80 := intstr.FromInt32(80)
	a.createPolicy(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "allow-y-80"},
		Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ns": "y"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &port80}},
			}},
		},
	})
	t.Run("policy change reaches the kernel", func(t *testing.T) {
		want = a.expect(ctx)
		a.converge(t, "allow-y-80", "y/a", "x/a", agentPorts[0], true, want, 0)
	})

	// A Service the egress compiler refuses: the agent reports it in an
	// Event, so the Event create is among the requests the audit sees.
	if _, err := a.admin.CoreV1().Services("y").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "bad-egress", Annotations: map[string]string{"nftguard.io/egress": "maybe"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Run("Event written", func(t *testing.T) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			evs, err := a.admin.CoreV1().Events("y").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=bad-egress"})
			if err != nil {
				t.Fatal(err)
			}
			if len(evs.Items) > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no Event about y/bad-egress after 30s\n%s", a.logs())
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("stop and start keep the table", func(t *testing.T) {
		stopWatch := a.watchDenied(t, "y/a", "x/a", agentPorts[1])
		pm.mustRun(t, "stop", "--time", "20", name)
		if st := pm.state(name); st != "exited 0" {
			t.Fatalf("container after podman stop (SIGTERM): %s, want exited 0\n%s", st, a.logs())
		}
		if out, err := exec.Command("ip", "netns", "exec", node.NetNS, "nft", "list", "table", "inet", "nftguard").CombinedOutput(); err != nil {
			t.Fatalf("the table is gone while the container is stopped: %v: %s", err, out)
		}
		a.checkMatrix(t, "container stopped", want)
		// A change while it is down is enforced once it is back.
		a.deletePolicy(ctx, "x", "allow-y-80")
		a.checkMatrix(t, "container stopped, policy deleted", want)
		restart := time.Now()
		pm.mustRun(t, "start", name)
		t.Logf("ready %v after podman start", waitReadyz(t, client, probes.readiness, restart, func() string { return pm.state(name) }, a.logs).Round(time.Millisecond))
		want = a.expect(ctx)
		a.converge(t, "restarted container", "y/a", "x/a", agentPorts[0], false, want, 0)
		if opened := stopWatch(); opened > 0 {
			t.Errorf("y/a -> x/a %v got through %d time(s) while the container restarted", agentPorts[1], opened)
		}
	})

	// Stopping ends the agent's watches: the audit log then holds them
	// completed, with their status codes.
	pm.mustRun(t, "stop", "--time", "20", name)
	events, err := a.srv.AuditEvents()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("no Forbidden", func(t *testing.T) {
		var forbidden []string
		for _, ev := range events {
			if ev.User.Username == agentSAUser && ev.ResponseStatus != nil && ev.ResponseStatus.Code == http.StatusForbidden {
				forbidden = append(forbidden, ev.Verb+" "+ev.RequestURI+": "+ev.ResponseStatus.Message)
			}
		}
		if len(forbidden) > 0 {
			t.Errorf("the API server refused the agent %d request(s):\n%s", len(forbidden), strings.Join(forbidden, "\n"))
		}
		if l := pm.logs(name); strings.Contains(strings.ToLower(l), "forbidden") {
			t.Errorf("the agent's log mentions Forbidden:\n%s", tailString(l, 6000))
		}
	})

	t.Run("ClusterRole and Role grant exactly what the agent uses", func(t *testing.T) {
		g, err := agentGrants()
		if err != nil {
			t.Fatal(err)
		}
		used := map[string]bool{}
		var missing []string
		leaseGets := 0
		for _, ev := range events {
			if ev.User.Username != agentSAUser || ev.ObjectRef == nil {
				continue // discovery (/api, /apis) is every user's
			}
			ref := ev.ObjectRef
			keys := []string{rbacKey(ref.APIGroup, ref.Resource, ref.Subresource, ev.Verb)}
			// client-go's informers ask for their initial list in the
			// watch (a streaming list, sendInitialEvents) and fall back to
			// list + watch where the API server does not serve that: what
			// they watch, they need to list.
			if ev.Verb == "watch" {
				keys = append(keys, rbacKey(ref.APIGroup, ref.Resource, ref.Subresource, "list"))
			}
			for _, k := range keys {
				used[k] = true
				if g.cluster[k] {
					continue
				}
				// Through a Role: only in its namespace, and only the
				// objects it names when it names any.
				if r, ok := g.roles[k]; ok && ref.Namespace == r.namespace && (len(r.names) == 0 || slices.Contains(r.names, ref.Name)) {
					continue
				}
				missing = append(missing, fmt.Sprintf("%s (namespace %q, name %q)", k, ref.Namespace, ref.Name))
			}
			if k := keys[0]; k == "coordination.k8s.io/leases get" && ref.Namespace == peerLease.ns && ref.Name == peerLease.name &&
				ev.ResponseStatus != nil && ev.ResponseStatus.Code == http.StatusOK {
				leaseGets++
			}
		}
		var unused []string
		for _, m := range []map[string]bool{g.cluster, g.roleKeys()} {
			for k := range m {
				if !used[k] {
					unused = append(unused, k)
				}
			}
		}
		slices.Sort(missing)
		missing = slices.Compact(missing)
		slices.Sort(unused)
		if len(missing) > 0 {
			t.Errorf("the agent used, deploy/rbac.yaml does not grant (group/resource verb):\n  %s", strings.Join(missing, "\n  "))
		}
		if len(unused) > 0 {
			t.Errorf("deploy/rbac.yaml grants, the agent never used (group/resource verb):\n  %s", strings.Join(unused, "\n  "))
		}
		if leaseGets == 0 {
			t.Errorf("the audit has no successful get of the Lease %s/%s by the agent", peerLease.ns, peerLease.name)
		}
		if len(missing)+len(unused) == 0 {
			t.Logf("the agent used %d (group, resource, verb) triples, all granted, none granted beyond them; %d gets of the Lease %s/%s",
				len(used), leaseGets, peerLease.ns, peerLease.name)
		}
	})

	// Removal as documented: the DaemonSet's agent is gone (stopped above)
	// and its table still enforces; deploy/cleanup/job.yaml's container,
	// run as the Job says, removes the table and nothing else.
	t.Run("cleanup Job removes the table", func(t *testing.T) {
		job := readCleanupJob(t)
		run, probes, err := podRunArgs(job.Spec.Template.Spec, "n1")
		if err != nil || probes != (httpProbes{}) {
			t.Fatalf("deploy/cleanup/job.yaml: %v (probes %+v)", err, probes)
		}
		if job.Spec.Template.Spec.Containers[0].Image != img.ref {
			t.Fatalf("the cleanup Job runs %s, the image is %s", job.Spec.Template.Spec.Containers[0].Image, img.ref)
		}
		a.checkMatrix(t, "agent removed, table in force", want)
		// Another tool's table in the same namespace, which must stay.
		nftNode := func(args ...string) (string, error) {
			out, err := exec.Command("ip", append([]string{"netns", "exec", node.NetNS, "nft"}, args...)...).CombinedOutput()
			return string(out), err
		}
		if out, err := nftNode("add", "table", "ip", "imgforeign"); err != nil {
			t.Fatalf("add a foreign table: %v: %s", err, out)
		}
		args := append(append(append([]string{"run", "--rm", "--name", name + "-cleanup", "--network", "ns:" + node.Path}, ulimits...), run.flags...), img.ref)
		pm.mustRun(t, append(args, run.args...)...)
		if out, err := nftNode("list", "table", "inet", "nftguard"); err == nil {
			t.Fatalf("the table is still there after the cleanup Job's container ran:\n%s", out)
		}
		if out, err := nftNode("list", "table", "ip", "imgforeign"); err != nil {
			t.Errorf("the cleanup removed another tool's table: %v: %s", err, out)
		}
		a.checkMatrix(t, "after cleanup", func(from, to string, p netlab.Port) bool { return true })
	})
}

// builtImage is what buildImage made and read back from the layout.
type builtImage struct {
	dir, archive                       string
	ref, version, revision, source     string
	config                             imageConfig
	archiveSize, layerSize, binarySize int64
}

type imageConfig struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Config       struct {
		User       string   `json:"User"`
		Entrypoint []string `json:"Entrypoint"`
		Cmd        []string `json:"Cmd"`
		WorkingDir string   `json:"WorkingDir"`
		Env        []string `json:"Env"`
	} `json:"config"`
}

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
	} `json:"platform"`
}

type ociManifest struct {
	MediaType   string            `json:"mediaType"`
	Manifests   []ociDescriptor   `json:"manifests"` // an index
	Config      ociDescriptor     `json:"config"`    // an image
	Layers      []ociDescriptor   `json:"layers"`
	Annotations map[string]string `json:"annotations"`
}

// buildImage runs hack/image (what `make image` runs) for this machine's
// architecture twice, into two directories, and requires the same bytes.
func buildImage(t *testing.T) *builtImage {
	t.Helper()
	tmp, err := os.MkdirTemp("", "img-build-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	var outs [2]string
	var archives [2][]byte
	for i := range outs {
		out := filepath.Join(tmp, strconv.Itoa(i))
		cmd := exec.Command("go", "run", ".", "-src", "../..", "-out", out, "-arch", runtime.GOARCH)
		cmd.Dir = filepath.Join("..", "hack", "image")
		msg, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("hack/image: %v\n%s", err, msg)
		}
		outs[i] = strings.SplitN(string(msg), "\n", 2)[0]
		matches, _ := filepath.Glob(filepath.Join(out, "*.oci.tar"))
		if len(matches) != 1 {
			t.Fatalf("hack/image wrote %v, want one *.oci.tar", matches)
		}
		if archives[i], err = os.ReadFile(matches[0]); err != nil {
			t.Fatal(err)
		}
	}
	if outs[0] != outs[1] || !bytes.Equal(archives[0], archives[1]) {
		t.Fatalf("two builds of the same commit differ: %s (archive sha256 %s) and %s (archive sha256 %s)",
			outs[0], sha256Hex(archives[0]), outs[1], sha256Hex(archives[1]))
	}
	t.Logf("built twice, the same: %s", outs[0])

	img := &builtImage{dir: filepath.Join(tmp, "0", "oci"), archiveSize: int64(len(archives[0]))}
	matches, _ := filepath.Glob(filepath.Join(tmp, "0", "*.oci.tar"))
	img.archive = matches[0]
	var top ociManifest
	readJSON(t, filepath.Join(img.dir, "index.json"), &top)
	if len(top.Manifests) != 1 {
		t.Fatalf("index.json lists %d manifests, want the one image index", len(top.Manifests))
	}
	img.ref = top.Manifests[0].Annotations["org.opencontainers.image.ref.name"]
	var idx ociManifest
	readJSON(t, img.blob(top.Manifests[0].Digest), &idx)
	img.version = idx.Annotations["org.opencontainers.image.version"]
	img.revision = idx.Annotations["org.opencontainers.image.revision"]
	img.source = idx.Annotations["org.opencontainers.image.source"]
	if version := readVersion(t); img.version != version || img.ref != "ghcr.io/nftguard/nftguard:"+version {
		t.Errorf("image %s, version annotation %q; want ghcr.io/nftguard/nftguard:%s (the VERSION file)", img.ref, img.version, version)
	}
	if rev, err := exec.Command("git", "rev-parse", "HEAD").Output(); err != nil || strings.TrimSpace(string(rev)) != img.revision {
		t.Errorf("revision annotation %q, git rev-parse HEAD %q (%v)", img.revision, rev, err)
	}
	if img.source == "" {
		t.Error("no org.opencontainers.image.source annotation")
	}
	if len(idx.Manifests) != 1 || idx.Manifests[0].Platform == nil || idx.Manifests[0].Platform.Architecture != runtime.GOARCH {
		t.Fatalf("image index %+v: want one linux/%s image", idx.Manifests, runtime.GOARCH)
	}
	var m ociManifest
	readJSON(t, img.blob(idx.Manifests[0].Digest), &m)
	readJSON(t, img.blob(m.Config.Digest), &img.config)
	if len(m.Layers) != 1 {
		t.Fatalf("image has %d layers, want 1 (the binary)", len(m.Layers))
	}
	img.layerSize = m.Layers[0].Size
	img.binarySize = checkLayer(t, img.blob(m.Layers[0].Digest), img.config.Config.Entrypoint)
	return img
}

// checkLayer reads the image's one layer: the one file, the entrypoint,
// root-owned and 0755; it returns the file's size.
func checkLayer(t *testing.T, path string, entrypoint []string) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("layer %s: %v", path, err)
	}
	tr := tar.NewReader(zr)
	var size int64
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("layer %s: %v", path, err)
		}
		names = append(names, hdr.Name)
		if hdr.Typeflag != tar.TypeReg || hdr.Mode != 0o755 || hdr.Uid != 0 || hdr.Gid != 0 {
			t.Errorf("layer entry %s: type %c mode %o uid %d gid %d, want a root-owned 0755 file", hdr.Name, hdr.Typeflag, hdr.Mode, hdr.Uid, hdr.Gid)
		}
		size = hdr.Size
	}
	if len(entrypoint) != 1 || len(names) != 1 || "/"+names[0] != entrypoint[0] {
		t.Errorf("the layer holds %v, the entrypoint is %v: want the one binary", names, entrypoint)
	}
	return size
}

func (img *builtImage) blob(digest string) string {
	return filepath.Join(img.dir, "blobs", strings.Replace(digest, ":", string(filepath.Separator), 1))
}

// checkDockerfile: the Dockerfile's final stage must make what hack/image
// makes: one binary at the entrypoint's path, "run" by default, no USER.
func checkDockerfile(t *testing.T, img *builtImage) {
	data, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	stages := strings.Split(string(data), "\nFROM ")
	final := stages[len(stages)-1]
	if !strings.HasPrefix(final, "scratch") {
		t.Errorf("the Dockerfile's final stage is FROM %s, want scratch", strings.SplitN(final, "\n", 2)[0])
	}
	c := img.config.Config
	if len(c.Entrypoint) != 1 {
		t.Fatalf("image entrypoint %v, want the binary", c.Entrypoint)
	}
	want := []string{
		"COPY --from=build /out/nftguard " + c.Entrypoint[0],
		fmt.Sprintf("ENTRYPOINT [%q]", c.Entrypoint[0]),
		fmt.Sprintf("CMD [%q]", strings.Join(c.Cmd, `", "`)),
	}
	for _, w := range want {
		if !strings.Contains(final, w+"\n") {
			t.Errorf("the Dockerfile's final stage has no %q (hack/image's image: entrypoint %v, cmd %v)", w, c.Entrypoint, c.Cmd)
		}
	}
	if strings.Contains(final, "\nUSER ") || c.User != "" {
		t.Errorf("USER in the Dockerfile or the image (%q): both run as root with capabilities dropped by the DaemonSet", c.User)
	}
	if img.config.OS != "linux" || img.config.Architecture != runtime.GOARCH {
		t.Errorf("image config for %s/%s", img.config.OS, img.config.Architecture)
	}
}

// containerRun is how podman runs the DaemonSet's container.
type containerRun struct {
	flags []string // podman run flags
	args  []string // the container's arguments
}

// httpProbes are the URLs of the DaemonSet's HTTP probes.
type httpProbes struct{ readiness, liveness string }

func probeURL(p *corev1.Probe) (string, error) {
	if p == nil || p.HTTPGet == nil || p.HTTPGet.Port.Type != intstr.Int || p.HTTPGet.Scheme == corev1.URISchemeHTTPS {
		return "", fmt.Errorf("want an httpGet probe with a numeric port")
	}
	return "http://" + net.JoinHostPort(p.HTTPGet.Host, strconv.Itoa(p.HTTPGet.Port.IntValue())) + p.HTTPGet.Path, nil
}

// daemonSetRunArgs translates the DaemonSet's container into podman run
// flags, and refuses what it does not know: a new setting in
// deploy/daemonset.yaml must be run here too before the test passes.
func daemonSetRunArgs(ds *appsv1.DaemonSet, nodeName string) (containerRun, httpProbes, error) {
	run, probes, err := podRunArgs(ds.Spec.Template.Spec, nodeName)
	if err == nil && (probes.readiness == "" || probes.liveness == "") {
		err = fmt.Errorf("want a readinessProbe and a livenessProbe")
	}
	return run, probes, err
}

// podRunArgs translates a pod's one container into podman run flags, and
// refuses what it does not know (see daemonSetRunArgs).
func podRunArgs(spec corev1.PodSpec, nodeName string) (containerRun, httpProbes, error) {
	var run containerRun
	var probe httpProbes
	if len(spec.Containers) != 1 || len(spec.InitContainers) != 0 || len(spec.Volumes) != 0 {
		return run, probe, fmt.Errorf("want one container, no init containers, no volumes (the test runs exactly that)")
	}
	if !spec.HostNetwork || spec.HostPID || spec.HostIPC || spec.SecurityContext != nil {
		return run, probe, fmt.Errorf("want hostNetwork (the test runs the container in a lab node's network namespace), no hostPID, hostIPC or pod securityContext")
	}
	c := spec.Containers[0]
	if len(c.Command) != 0 || len(c.VolumeMounts) != 0 || len(c.EnvFrom) != 0 || len(c.Ports) != 0 {
		return run, probe, fmt.Errorf("command, volumeMounts, envFrom or ports: not run by the test")
	}
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName":
			env[e.Name] = nodeName
		default:
			return run, probe, fmt.Errorf("env %s: only values and spec.nodeName are run by the test", e.Name)
		}
		run.flags = append(run.flags, "--env", e.Name+"="+env[e.Name])
	}
	for _, arg := range c.Args {
		for k, v := range env {
			arg = strings.ReplaceAll(arg, "$("+k+")", v)
		}
		run.args = append(run.args, arg)
	}
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil || sc.Privileged != nil || sc.RunAsGroup != nil || sc.RunAsNonRoot != nil || sc.ProcMount != nil || sc.SELinuxOptions != nil || sc.AppArmorProfile != nil || sc.WindowsOptions != nil {
		return run, probe, fmt.Errorf("securityContext: want runAsUser, readOnlyRootFilesystem, allowPrivilegeEscalation, capabilities and seccompProfile, nothing else")
	}
	if sc.RunAsUser != nil {
		run.flags = append(run.flags, "--user", strconv.FormatInt(*sc.RunAsUser, 10))
	}
	if sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
		// No tmpfs on /tmp, /run: Kubernetes mounts none.
		run.flags = append(run.flags, "--read-only", "--read-only-tmpfs=false")
	}
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		run.flags = append(run.flags, "--security-opt", "no-new-privileges")
	}
	for _, cp := range sc.Capabilities.Drop {
		run.flags = append(run.flags, "--cap-drop", strings.ToLower(string(cp)))
	}
	for _, cp := range sc.Capabilities.Add {
		run.flags = append(run.flags, "--cap-add", string(cp))
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		return run, probe, fmt.Errorf("seccompProfile: the test runs RuntimeDefault (podman's default profile)")
	}
	if mem, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		run.flags = append(run.flags, "--memory", strconv.FormatInt(mem.Value(), 10))
	}
	var err error
	if c.ReadinessProbe != nil {
		if probe.readiness, err = probeURL(c.ReadinessProbe); err != nil {
			return run, probe, fmt.Errorf("readinessProbe: %w", err)
		}
	}
	if c.LivenessProbe != nil {
		if probe.liveness, err = probeURL(c.LivenessProbe); err != nil {
			return run, probe, fmt.Errorf("livenessProbe: %w", err)
		}
	}
	if c.StartupProbe != nil {
		return run, probe, fmt.Errorf("startupProbe: not run by the test")
	}
	return run, probe, nil
}

// checkContainerSecurity reads the agent's process from the host's /proc:
// only NET_ADMIN effective and permitted (and nothing to inherit), no new
// privileges, a seccomp filter (podman's default profile), a read-only
// root, the DaemonSet's memory limit and environment.
func checkContainerSecurity(t *testing.T, pm *podman, name string, ds *appsv1.DaemonSet) {
	pid := strings.TrimSpace(pm.mustRun(t, "inspect", "--format", "{{.State.Pid}}", name))
	status, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		t.Fatal(err)
	}
	const netAdmin = "0000000000001000" // 1 << CAP_NET_ADMIN (12)
	want := map[string]string{"CapEff": netAdmin, "CapPrm": netAdmin, "CapInh": "0000000000000000", "CapAmb": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2"}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		if w, ok := want[k]; ok {
			if strings.TrimSpace(v) != w {
				t.Errorf("agent process %s: %s %s, want %s", pid, k, strings.TrimSpace(v), w)
			}
			delete(want, k)
		}
	}
	if len(want) > 0 {
		t.Errorf("no %v in /proc/%s/status", want, pid)
	}
	// The root file system is mounted read-only, the token's directory too.
	mounts, err := os.ReadFile(filepath.Join("/proc", pid, "mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	ro := map[string]bool{}
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 5 {
			ro[f[4]] = slices.Contains(strings.Split(f[5], ","), "ro")
		}
	}
	for _, mp := range []string{"/", saMountPath} {
		if !ro[mp] {
			t.Errorf("%s is not mounted read-only in the container:\n%s", mp, mounts)
		}
	}
	// The memory limit, in the agent's memory cgroup (v1 or v2), and
	// the Go heap's soft limit beside it.
	limit := ds.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]
	if got := cgroupMemoryLimit(t, pid); got != limit.Value() {
		t.Errorf("the agent's memory cgroup allows %d bytes, the DaemonSet %d", got, limit.Value())
	}
	environ, err := os.ReadFile(filepath.Join("/proc", pid, "environ"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ds.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom == nil && !slices.Contains(strings.Split(string(environ), "\x00"), e.Name+"="+e.Value) {
			t.Errorf("the agent's environment has no %s=%s", e.Name, e.Value)
		}
	}
}

// cgroupMemoryLimit reads the memory limit of a process's cgroup.
func cgroupMemoryLimit(t *testing.T, pid string) int64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", pid, "cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	var file string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if slices.Contains(strings.Split(f[1], ","), "memory") {
			file = filepath.Join("/sys/fs/cgroup/memory", f[2], "memory.limit_in_bytes")
			break
		}
		if f[0] == "0" && f[1] == "" && file == "" {
			file = filepath.Join("/sys/fs/cgroup", f[2], "memory.max") // v2
		}
	}
	if file == "" {
		t.Fatalf("no memory cgroup in /proc/%s/cgroup:\n%s", pid, data)
	}
	v, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return n
}

// serviceAccount is the directory mounted where client-go looks.
type serviceAccount struct {
	dir, token, ca string
}

// writeServiceAccount asks the TokenRequest API for a token of
// deploy/rbac.yaml's ServiceAccount (applied by newAgentLabWith) and writes
// token, ca.crt and namespace as the kubelet would.
func writeServiceAccount(ctx context.Context, t *testing.T, a *agentLab) serviceAccount {
	t.Helper()
	exp := int64(3600)
	tr, err := a.admin.CoreV1().ServiceAccounts(agentSANamespace).CreateToken(ctx, agentSAName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", agentSANamespace, agentSAName, err)
	}
	ca, err := os.ReadFile(a.srv.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	sa := serviceAccount{dir: filepath.Join(a.dir, "img-serviceaccount"), token: tr.Status.Token}
	if err := os.Mkdir(sa.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sa.ca = filepath.Join(sa.dir, "ca.crt")
	for f, data := range map[string][]byte{"token": []byte(sa.token), "ca.crt": ca, "namespace": []byte(agentSANamespace)} {
		if err := os.WriteFile(filepath.Join(sa.dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return sa
}

// relayInto listens on 127.0.0.1 inside the network namespace at nsPath
// and forwards each connection to target on the host's loopback: the
// container's in-cluster address of the API server, whose certificate is
// valid for 127.0.0.1. Nothing of the host's network changes; the relay
// ends with the test.
func relayInto(t *testing.T, nsPath, target string) int {
	t.Helper()
	var l net.Listener
	err := netlab.InNetNS(nsPath, func() error {
		var err error
		l, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	})
	if err != nil {
		t.Fatalf("relay listener in %s: %v", nsPath, err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	track := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if conns == nil {
			return false // closed
		}
		conns = append(conns, c)
		return true
	}
	conns = []net.Conn{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			if !track(in) || !track(out) {
				in.Close()
				out.Close()
				return
			}
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(out, in); out.Close() }()
			go func() { defer wg.Done(); io.Copy(in, out); in.Close() }()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		conns = nil
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().(*net.TCPAddr).Port
}

// nsHTTPClient makes its connections from inside a network namespace.
func nsHTTPClient(nsPath string) *http.Client {
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := netlab.InNetNS(nsPath, func() error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
	}}
}

// waitReadyz polls url until it answers 200 and returns how long that
// took since start; it fails when state (a container's) leaves "running"
// or after a minute.
func waitReadyz(t *testing.T, client *http.Client, url string, start time.Time, state func() string, logs func() string) time.Duration {
	t.Helper()
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(start)
			}
		}
		if st := state(); st != "running" && st != "created" && st != "configured" && st != "initialized" {
			t.Fatalf("agent not ready, its container is %s (last probe: %v)\n%s", st, err, logs())
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("agent not ready on %s after a minute (last probe: %v)\n%s", url, err, logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// coldStartOnHost runs the test's binary on the host, against the same
// node, API server and token, until it is ready; then stops it and removes
// its table, so the container starts from the same empty node.
func coldStartOnHost(t *testing.T, a *agentLab, sa serviceAccount) time.Duration {
	t.Helper()
	kc := filepath.Join(a.dir, "img-kubeconfig-sa")
	cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: %q, certificate-authority: %q}}]\n"+
		"users: [{name: u, user: {token: %q}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n", a.srv.Host, sa.ca, sa.token)
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	logPath := filepath.Join(a.dir, "img-host-agent.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	node := a.lab.Node("n1")
	cmd := exec.Command(nftguardBin, "run", "--kubeconfig", kc, "--node-name", "n1", "--netns", node.Path, "--metrics-addr", addr, "--log-format", "json")
	cmd.Stdout, cmd.Stderr = logf, logf
	start := time.Now()
	p, err := childproc.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	logs := func() string { return "--- host agent log ---\n" + tailString(readFileString(logPath), 6000) }
	state := func() string {
		if p.Exited() {
			return fmt.Sprintf("exited (%v)", p.Err())
		}
		return "running"
	}
	took := waitReadyz(t, http.DefaultClient, "http://"+addr+"/readyz", start, state, logs)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if out, err := exec.Command(nftguardBin, "cleanup", "--netns", node.Path).CombinedOutput(); err != nil {
		t.Fatalf("nftguard cleanup: %v: %s", err, out)
	}
	return took
}

// podman runs podman with storage, run state and temporary files of its
// own under a temporary directory: the host's containers and images are
// untouched, and the directory goes with the test.
type podman struct {
	dir  string
	base []string
}

// podmanPrefix starts the name of each test's podman directory, followed by
// its owner tag (testns.Owner): a run that died before its cleanup leaves
// containers behind, which the next run removes.
const podmanPrefix = "img-podman-"

func podmanAt(dir string) *podman {
	return &podman{dir: dir, base: []string{
		"--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "run"), "--tmpdir", filepath.Join(dir, "tmp"),
		"--storage-driver", "vfs", "--events-backend", "file",
		// crun refuses this machine's hybrid cgroup layout; podman's
		// systemd cgroup manager needs systemd.
		"--runtime", "runc", "--cgroup-manager", "cgroupfs",
	}}
}

// remove removes every container and image of the directory, then the
// directory.
func (pm *podman) remove() error {
	var errs []error
	if out, err := pm.run("rm", "--all", "--force", "--time", "0"); err != nil {
		errs = append(errs, fmt.Errorf("podman rm: %w: %s", err, out))
	}
	if out, err := pm.run("rmi", "--all", "--force"); err != nil {
		errs = append(errs, fmt.Errorf("podman rmi: %w: %s", err, out))
	}
	if err := unmountUnder(pm.dir); err != nil {
		errs = append(errs, err)
	}
	if err := os.RemoveAll(pm.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove podman's directory: %w", err))
	}
	return errors.Join(errs...)
}

func newPodman(t *testing.T) *podman {
	t.Helper()
	stale, _ := filepath.Glob(filepath.Join(os.TempDir(), podmanPrefix+"*"))
	for _, dir := range stale {
		if !testns.Alive(strings.TrimPrefix(filepath.Base(dir), podmanPrefix)) {
			if err := podmanAt(dir).remove(); err != nil {
				t.Logf("stale %s: %v", dir, err)
			}
		}
	}
	owner, err := testns.Owner()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", podmanPrefix+owner+"-")
	if err != nil {
		t.Fatal(err)
	}
	pm := podmanAt(dir)
	t.Cleanup(func() {
		if err := pm.remove(); err != nil {
			t.Error(err)
		}
	})
	// A runtime that cannot run at all fails here, saying why.
	if out, err := pm.run("info", "--format", "{{.Host.OCIRuntime.Name}} {{.Host.OCIRuntime.Version}}"); err != nil {
		t.Fatalf("podman cannot run: %v\n%s", err, out)
	}
	return pm
}

func (pm *podman) run(args ...string) (string, error) {
	cmd := exec.Command("podman", append(append([]string{}, pm.base...), args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (pm *podman) mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := pm.run(args...)
	if err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// load loads an oci-archive and returns the name podman gave it.
func (pm *podman) load(t *testing.T, archive string) string {
	t.Helper()
	pm.mustRun(t, "load", "--quiet", "--input", archive)
	out := pm.mustRun(t, "images", "--format", "{{.Repository}}:{{.Tag}}")
	return strings.TrimSpace(out)
}

// state is "running", "exited CODE" and so on.
func (pm *podman) state(name string) string {
	out, err := pm.run("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", name)
	if err != nil {
		return "unknown: " + strings.TrimSpace(out)
	}
	st, code, _ := strings.Cut(strings.TrimSpace(out), " ")
	if st == "exited" || st == "stopped" {
		return "exited " + code
	}
	return st
}

func (pm *podman) logs(name string) string {
	out, err := pm.run("logs", name)
	if err != nil {
		return fmt.Sprintf("(podman logs: %v: %s)", err, out)
	}
	return out
}

// unmountUnder unmounts what podman may have left mounted below dir
// (deepest first), so that removing dir removes only files.
func unmountUnder(dir string) error {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("mountinfo: %w", err)
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			points = append(points, f[4])
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// podmanNprocCeiling caps the container's RLIMIT_NPROC. Measured on the
// development machine (podman 4.3.1, runc 1.1.5): the test's own limit was
// 96,367, yet runc refused anything above 32,768 with EPERM ("error setting
// rlimit type 6"); conmon, which podman starts and whose child the
// container's process is, ran with RLIMIT_NPROC 32,768 (/proc/PID/limits).
const podmanNprocCeiling = 32768

// currentUlimits are podman's --ulimit flags at or below the test
// process's own open-file and process limits: podman's defaults (1,048,576)
// exceed them, and runc then refuses to start the container (EPERM).
func currentUlimits(t *testing.T) []string {
	t.Helper()
	var flags []string
	for _, l := range []struct {
		name    string
		res     int
		ceiling uint64
	}{{"nofile", syscall.RLIMIT_NOFILE, 0}, {"nproc", 6 /* RLIMIT_NPROC */, podmanNprocCeiling}} {
		var r syscall.Rlimit
		if err := syscall.Getrlimit(l.res, &r); err != nil {
			t.Fatalf("getrlimit %s: %v", l.name, err)
		}
		n := r.Cur
		if l.ceiling > 0 && n > l.ceiling {
			n = l.ceiling
		}
		flags = append(flags, "--ulimit", fmt.Sprintf("%s=%d:%d", l.name, n, n))
	}
	return flags
}

// snapshotHost is the host's ruleset and forwarding switches, read only.
func snapshotHost(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("nft", "list", "ruleset").CombinedOutput()
	if err != nil {
		t.Fatalf("nft list ruleset: %v: %s", err, out)
	}
	var b strings.Builder
	b.Write(out)
	for _, k := range []string{"net/ipv4/ip_forward", "net/ipv6/conf/all/forwarding", "net/ipv6/conf/default/forwarding"} {
		v, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s = %s", k, v)
	}
	return b.String()
}

// rbacGrants are deploy/rbac.yaml's rules expanded into (group/resource
// verb) keys: the ClusterRole's, and its Roles' with the namespace and the
// resourceNames they are limited to.
type rbacGrants struct {
	cluster map[string]bool
	roles   map[string]roleScope
}

type roleScope struct {
	namespace string
	names     []string
}

func (g rbacGrants) roleKeys() map[string]bool {
	out := map[string]bool{}
	for k := range g.roles {
		out[k] = true
	}
	return out
}

// agentGrants expands deploy/rbac.yaml's ClusterRole and Roles. No
// wildcards, no nonResourceURLs; resourceNames only in a Role (the
// ClusterRole's rules are compared as whole triples).
func agentGrants() (rbacGrants, error) {
	g := rbacGrants{cluster: map[string]bool{}, roles: map[string]roleScope{}}
	data, err := os.ReadFile(filepath.Join("..", "deploy", "rbac.yaml"))
	if err != nil {
		return g, err
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var role rbacv1.Role
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil {
			return g, fmt.Errorf("deploy/rbac.yaml: %w", err)
		}
		if role.Kind != "ClusterRole" && role.Kind != "Role" {
			continue
		}
		for _, r := range role.Rules {
			if len(r.NonResourceURLs) > 0 || role.Kind == "ClusterRole" && len(r.ResourceNames) > 0 {
				return g, fmt.Errorf("%s rule %+v: nonResourceURLs, and a ClusterRole's resourceNames, are not compared", role.Kind, r)
			}
			for _, grp := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						if grp == "*" || res == "*" || v == "*" {
							return g, fmt.Errorf("rule %+v: a wildcard grants what nobody listed", r)
						}
						resource, sub, _ := strings.Cut(res, "/")
						k := rbacKey(grp, resource, sub, v)
						if role.Kind == "ClusterRole" {
							g.cluster[k] = true
							continue
						}
						if _, dup := g.roles[k]; dup {
							return g, fmt.Errorf("%s granted by two Roles: not compared", k)
						}
						g.roles[k] = roleScope{namespace: role.Namespace, names: r.ResourceNames}
					}
				}
			}
		}
	}
	return g, nil
}

func rbacKey(group, resource, subresource, verb string) string {
	if subresource != "" {
		resource += "/" + subresource
	}
	if group == "" {
		group = "core"
	}
	return group + "/" + resource + " " + verb
}

type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

// readKustomization reads deploy/kustomization.yaml strictly: a field the
// test does not know (a patch, a transformer) would make kustomize's output
// differ from the files the tests apply.
func readKustomization(t *testing.T) kustomization {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "deploy", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatalf("deploy/kustomization.yaml: %v (the tests apply the listed files as they are)", err)
	}
	if k.Kind != "Kustomization" || len(k.Resources) == 0 {
		t.Fatalf("deploy/kustomization.yaml: kind %q with %d resources", k.Kind, len(k.Resources))
	}
	return k
}

func readDaemonSet(t *testing.T) *appsv1.DaemonSet {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "deploy", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(data, &ds); err != nil {
		t.Fatalf("deploy/daemonset.yaml: %v", err)
	}
	if len(ds.Spec.Template.Spec.Containers) == 0 {
		t.Fatal("deploy/daemonset.yaml has no container")
	}
	return &ds
}

func readCleanupJob(t *testing.T) *batchv1.Job {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "deploy", "cleanup", "job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	if err := yaml.UnmarshalStrict(data, &job); err != nil {
		t.Fatalf("deploy/cleanup/job.yaml: %v", err)
	}
	return &job
}

func readVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(data))
	if v == "" || v == "latest" {
		t.Fatalf("VERSION is %q: a release names a version", v)
	}
	return v
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func readFileString(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func tailString(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
