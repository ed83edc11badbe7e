package cnpconformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/nftguard/nftguard/internal/netlab"
	"github.com/nftguard/nftguard/internal/testns"
)

const preflightNS = suiteNamespacePrefix + "preflight"

// preflight checks the harness itself before the suite runs, with no
// policy in place: the StatefulSet controller and kubelets bring pods up
// (ordinary and host-network) with addresses and readiness, the exec
// bridge answers as agnhost connect does (success, REFUSED for an unserved
// port, TIMEOUT for traffic dropped by a rule written by hand in a lab node,
// a 400 for an unknown container or command), host names resolve through
// the cluster DNS (a served name connects, an unknown one fails as agnhost's
// DNS error), a deleted pod comes back as a new pod, and a deleted
// namespace is emptied and finalized.
func preflight(ctx context.Context, t *testing.T, cs kubernetes.Interface, lab *netlab.Lab, k *kubelet, execURL string, clusterDNS netip.Addr) {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: preflightNS}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agnhost := "registry.k8s.io/e2e-test-images/agnhost:2.45"
	set := func(name string, replicas int32, host bool, containers ...corev1.Container) *appsv1.StatefulSet {
		lbl := map[string]string{"preflight": name}
		return &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: preflightNS},
			Spec: appsv1.StatefulSetSpec{
				Replicas: &replicas,
				Selector: &metav1.LabelSelector{MatchLabels: lbl},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: lbl},
					Spec:       corev1.PodSpec{HostNetwork: host, Containers: containers},
				},
			},
		}
	}
	sh := func(name, cmd string, ports ...corev1.ContainerPort) corev1.Container {
		return corev1.Container{Name: name, Image: agnhost, Command: []string{"/bin/bash", "-c", cmd}, Ports: ports}
	}
	sets := []*appsv1.StatefulSet{
		set("probe", 2, false,
			corev1.Container{Name: "probe-client", Image: agnhost},
			sh("probe-80", "/agnhost serve-hostname --tcp --http=false --port 80", corev1.ContainerPort{ContainerPort: 80, Name: "web"}),
			sh("probe-53", "/agnhost serve-hostname --udp --http=false --port 53"),
			corev1.Container{Name: "probe-9003", Image: agnhost, Command: []string{"/bin/bash", "-c", "/agnhost porter"},
				Env: []corev1.EnvVar{{Name: "SERVE_SCTP_PORT_9003", Value: "foo"}}}),
		set("hostprobe", 1, true,
			corev1.Container{Name: "hostprobe-client", Image: agnhost},
			sh("hostprobe-34345", "/agnhost serve-hostname --tcp --http=false --port 34345",
				corev1.ContainerPort{ContainerPort: 34345, Protocol: corev1.ProtocolTCP})),
	}
	for _, s := range sets {
		if _, err := cs.AppsV1().StatefulSets(preflightNS).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitReady := func(name string, want int32) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			s, err := cs.AppsV1().StatefulSets(preflightNS).Get(ctx, name, metav1.GetOptions{})
			return err == nil && s.Status.ReadyReplicas == want && s.Status.AvailableReplicas == want, nil
		})
		if err != nil {
			n, last := k.errors()
			t.Fatalf("statefulset %s: not %d ready replicas: %v (controller errors %d, last %q)", name, want, err, n, last)
		}
	}
	waitReady("probe", 2)
	waitReady("hostprobe", 1)
	pod := func(name string) *corev1.Pod {
		t.Helper()
		p, err := cs.CoreV1().Pods(preflightNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p0, p1, h0 := pod("probe-0"), pod("probe-1"), pod("hostprobe-0")
	if p0.Spec.NodeName != k.podNodes[0] || p1.Spec.NodeName != k.podNodes[1] || h0.Spec.NodeName != k.hostNodes[0] {
		t.Errorf("placement: probe-0 on %q, probe-1 on %q, hostprobe-0 on %q; want %s, %s, %s",
			p0.Spec.NodeName, p1.Spec.NodeName, h0.Spec.NodeName, k.podNodes[0], k.podNodes[1], k.hostNodes[0])
	}
	if want := lab.Node(k.hostNodes[0]).IPv4.String(); h0.Status.PodIP != want || h0.Status.HostIP != want {
		t.Errorf("host-network pod: podIP %q hostIP %q, want the node's %s", h0.Status.PodIP, h0.Status.HostIP, want)
	}
	if p0.Status.PodIP == "" || len(p0.Status.PodIPs) != 2 || p0.Labels["preflight"] != "probe" {
		t.Errorf("probe-0: podIPs %v labels %v", p0.Status.PodIPs, p0.Labels)
	}

	probe := func(from, proto, ip string, port int, wantPrefix string) {
		t.Helper()
		cmd := []string{"/agnhost", "connect", "--timeout=1s", "--protocol=" + proto, fmt.Sprintf("%s:%d", ip, port)}
		status, res, body := execRaw(t, execURL, preflightNS, from, "probe-client", cmd)
		if status != http.StatusOK {
			t.Errorf("exec %v from %s: HTTP %d %s", cmd, from, status, body)
			return
		}
		switch {
		case wantPrefix == "" && (res.ExitCode != 0 || res.Stderr != ""):
			t.Errorf("%v from %s: want success, got exit %d %q", cmd, from, res.ExitCode, res.Stderr)
		case wantPrefix != "" && (res.ExitCode == 0 || !strings.HasPrefix(res.Stderr, wantPrefix)):
			t.Errorf("%v from %s: want %q, got exit %d %q", cmd, from, wantPrefix, res.ExitCode, res.Stderr)
		}
	}
	ip1 := p1.Status.PodIP
	probe("probe-0", "tcp", ip1, 80, "")
	probe("probe-0", "udp", ip1, 53, "")
	probe("probe-0", "sctp", ip1, 9003, "")
	probe("probe-1", "tcp", p0.Status.PodIP, 80, "")
	probe("probe-0", "tcp", h0.Status.PodIP, 34345, "")
	probe("probe-0", "tcp", ip1, 81, "REFUSED\n")
	probe("probe-0", "udp", ip1, 54, "REFUSED: ")

	// Dropped by hand in probe-1's node, in a table of the test's own.
	node := lab.Node(p1.Spec.NodeName)
	ns := &testns.NS{Name: node.NetNS, Path: node.Path}
	ns.MustExec(t, fmt.Sprintf("table inet ngpreflight {\n\tchain blockfwd {\n\t\ttype filter hook forward priority 0; ip daddr %s drop\n\t}\n}\n", ip1), "nft", "-f", "-")
	probe("probe-0", "tcp", ip1, 80, "TIMEOUT\n")
	probe("probe-0", "udp", ip1, 53, "TIMEOUT: ")
	probe("probe-0", "sctp", ip1, 9003, "TIMEOUT\n")
	ns.MustExec(t, "", "nft", "delete", "table", "inet", "ngpreflight")
	probe("probe-0", "tcp", ip1, 80, "")

	// Host names, resolved through the cluster DNS from the pod.
	probe("probe-0", "tcp", "diagon-alley.hogwarts.test", 80, "")
	probe("probe-1", "udp", "Knockturn-Alley.hogwarts.test.", 80, "")
	probe("probe-0", "tcp", "hogsmeade.hogwarts.test", 82, "REFUSED\n")
	probe("probe-1", "tcp", "nosuch.hogwarts.test", 80,
		fmt.Sprintf("DNS: lookup nosuch.hogwarts.test on %v: no such host\n", netip.AddrPortFrom(clusterDNS, 53)))
	hostCmd := []string{"/agnhost", "connect", "--timeout=1s", "--protocol=tcp", "diagon-alley.hogwarts.test:80"}
	if status, _, body := execRaw(t, execURL, preflightNS, "hostprobe-0", "hostprobe-client", hostCmd); status != http.StatusBadRequest {
		t.Errorf("a host name from a host-network pod: HTTP %d %s, want 400 (the lab's nodes have no resolver)", status, body)
	}

	cmd := []string{"/agnhost", "connect", "--timeout=1s", "--protocol=tcp", ip1 + ":80"}
	if status, _, body := execRaw(t, execURL, preflightNS, "probe-0", "nosuch-client", cmd); status != http.StatusBadRequest {
		t.Errorf("exec in an unknown container: HTTP %d %s, want 400", status, body)
	}
	if status, _, body := execRaw(t, execURL, preflightNS, "probe-0", "probe-client", []string{"/bin/sh", "-c", "true"}); status != http.StatusBadRequest {
		t.Errorf("exec of another command: HTTP %d %s, want 400", status, body)
	}

	// A deleted pod comes back as a new pod, ready and reachable.
	if err := cs.CoreV1().Pods(preflightNS).Delete(ctx, "probe-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(preflightNS).Get(ctx, "probe-1", metav1.GetOptions{})
		return err == nil && p.UID != p1.UID && podReady(p), nil
	})
	if err != nil {
		t.Fatalf("probe-1 not recreated: %v", err)
	}
	probe("probe-0", "tcp", pod("probe-1").Status.PodIP, 80, "")

	// The namespace controller's part: delete, empty, finalize.
	if err := cs.CoreV1().Namespaces().Delete(ctx, preflightNS, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, preflightNS, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("namespace %s not removed: %v", preflightNS, err)
	}
	k.mu.Lock()
	left := len(k.attached)
	k.mu.Unlock()
	if left != 0 {
		t.Errorf("%d lab pods still attached after their namespace was removed", left)
	}
}

// execRaw posts one exec request to the bridge as the patched upstream
// helper does.
func execRaw(t *testing.T, url, ns, pod, container string, cmd []string) (int, execResponse, string) {
	t.Helper()
	body, _ := json.Marshal(execRequest{Namespace: ns, Pod: pod, Container: container, Command: cmd})
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var res execResponse
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, &res); err != nil {
			t.Fatalf("exec response %q: %v", data, err)
		}
	}
	return resp.StatusCode, res, string(data)
}
