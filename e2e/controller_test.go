package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
	cnpclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"

	"github.com/nftguard/nftguard/controller"
	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/peerslice"
)

// ctlLab is an API server with the PeerSlice CRD and deploy/'s RBAC, for
// controllers run in the test process (controller.Run, to read their
// metrics and step their clock) or as the binary.
type ctlLab struct {
	t     *testing.T
	srv   *kubetest.Server
	admin kubernetes.Interface
	dyn   dynamic.Interface
	dir   string
}

// ctlUsers are the users controllers run as, each bound to the roles
// deploy/controller.yaml gives the controller's ServiceAccount: the tests
// run with exactly those permissions, and the audit log tells who wrote.
var ctlUsers = []string{"c37-ctl-a", "c37-ctl-b", "c37-ctl-c", "c37-ctl-d"}

func newCtlLab(t *testing.T, users ...string) *ctlLab {
	t.Helper()
	return newCtlLabWith(t, true, users...)
}

// newCtlLabWith is newCtlLab with the audit log on or off (it slows every
// request: off where the test measures time).
func newCtlLabWith(t *testing.T, audit bool, users ...string) *ctlLab {
	t.Helper()
	srv := kubetest.Start(t, kubetest.Options{Users: append(slices.Clone(ctlUsers), users...), Audit: audit})
	cfg := srv.Config(kubetest.Admin)
	l := &ctlLab{t: t, srv: srv, admin: kubernetes.NewForConfigOrDie(cfg), dyn: dynamic.NewForConfigOrDie(cfg), dir: t.TempDir()}
	ctx := context.Background()
	// As an operator installs it: deploy/crd.yaml, then the roles.
	for _, f := range []string{"crd.yaml", "rbac.yaml", "controller.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "deploy", f))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kubetest.Apply(ctx, cfg, data, true); err != nil {
			t.Fatalf("deploy/%s (dry run): %v", f, err)
		}
		if f == "crd.yaml" {
			if err := kubetest.InstallPeerSliceCRD(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := kubetest.Apply(ctx, cfg, data, false); err != nil {
			t.Fatalf("deploy/%s: %v", f, err)
		}
	}
	for _, u := range ctlUsers {
		l.bind(u, "ClusterRole", "nftguard-controller", "")
		l.bind(u, "Role", "nftguard-controller", "kube-system")
	}
	return l
}

// bind gives user a role: a ClusterRoleBinding when ns is "", else a
// RoleBinding in ns (of a Role, or of a ClusterRole when kind says so).
func (l *ctlLab) bind(user, kind, role, ns string) {
	l.t.Helper()
	ctx := context.Background()
	name := "c37-" + user + "-" + strings.ToLower(kind) + "-" + role
	subj := []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}}
	ref := rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: kind, Name: role}
	var err error
	if ns == "" {
		_, err = l.admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subj, RoleRef: ref}, metav1.CreateOptions{})
	} else {
		_, err = l.admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Subjects: subj, RoleRef: ref}, metav1.CreateOptions{})
	}
	if err != nil {
		l.t.Fatalf("bind %s to %s %s: %v", user, kind, role, err)
	}
}

// ctl is a controller run in the test process.
type ctl struct {
	id     string
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

type ctlOptions struct {
	batchDelay time.Duration
	clock      *clocktesting.FakeClock
	// qps and burst limit the client (default 200 and 400, as the
	// binary's); workers as Config.Workers.
	qps     float32
	burst   int
	workers int
	// slices sizes the slices (default peerslice.DefaultOptions).
	slices peerslice.Options
}

func (l *ctlLab) start(user string, opts ctlOptions) *ctl {
	l.t.Helper()
	cfg := l.srv.Config(user)
	cfg.QPS, cfg.Burst = 200, 400
	if opts.qps > 0 {
		cfg.QPS, cfg.Burst = opts.qps, opts.burst
	}
	clients, err := controller.NewClients(cfg)
	if err != nil {
		l.t.Fatal(err)
	}
	if opts.batchDelay == 0 {
		opts.batchDelay = 50 * time.Millisecond
	}
	c := &ctl{id: user, reg: prometheus.NewRegistry(), done: make(chan error, 1)}
	ccfg := controller.Config{
		Clients: clients, Identity: user, BatchDelay: opts.batchDelay,
		// Short, so that a controller killed without releasing the
		// Lease is replaced soon.
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond,
		Registerer: c.reg, Logger: testLogger(l.t, user), Workers: opts.workers, Slices: opts.slices,
	}
	if opts.clock != nil {
		ccfg.Clock = opts.clock
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() { c.done <- controller.Run(ctx, ccfg) }()
	l.t.Cleanup(c.stop)
	return c
}

// stop ends a controller and waits until it returned (it released the
// Lease: ReleaseOnCancel).
func (c *ctl) stop() {
	c.once.Do(func() {
		c.cancel()
		if err := <-c.done; err != nil {
			panic(fmt.Sprintf("controller %s: %v", c.id, err))
		}
	})
}

// metric sums every series of a metric family.
func (c *ctl) metric(name string) float64 {
	mfs, err := c.reg.Gather()
	if err != nil {
		panic(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return sum
}

func (c *ctl) writes() int { return int(c.metric("nftguard_controller_writes_total")) }

// testLogger logs a controller into a buffer, printed if the test fails:
// t.Log would race with goroutines that end after the test.
func testLogger(t *testing.T, who string) *slog.Logger {
	var b syncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			out := b.String()
			if len(out) > 8000 {
				out = out[len(out)-8000:]
			}
			t.Logf("log of controller %s:\n%s", who, out)
		}
	})
	return slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// lease is the controller Lease (nil while there is none).
func (l *ctlLab) lease() *coordinationv1.Lease {
	le, err := l.admin.CoordinationV1().Leases("kube-system").Get(context.Background(), controller.DefaultLeaseName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		l.t.Fatal(err)
	}
	return le
}

// waitPublished waits until id has annotated the Lease: its first full
// reconcile is done.
func (l *ctlLab) waitPublished(id string, within time.Duration) {
	l.t.Helper()
	waitFor(l.t, within, id+" publishes", func() bool {
		le := l.lease()
		return le != nil && le.Annotations[peerslice.AnnotationPublished] == id
	})
}

// slicesOf lists a namespace's slices.
func (l *ctlLab) slicesOf(ns string) []*peerslice.PeerSlice {
	l.t.Helper()
	list, err := l.dyn.Resource(peerslice.GroupVersionResource).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		l.t.Fatal(err)
	}
	var out []*peerslice.PeerSlice
	for i := range list.Items {
		s, err := peerslice.FromUnstructured(&list.Items[i])
		if err != nil {
			l.t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// records are a namespace's records by pod name; a pod recorded twice is
// reported with the name "DUPLICATE:" + name.
func (l *ctlLab) records(ns string) map[string]peerslice.Peer {
	out := map[string]peerslice.Peer{}
	for _, s := range l.slicesOf(ns) {
		for _, p := range s.Peers {
			if _, ok := out[p.Name]; ok {
				out["DUPLICATE:"+p.Name] = p
			}
			out[p.Name] = p
		}
	}
	return out
}

func recordsEqual(a, b map[string]peerslice.Peer) bool {
	return maps.EqualFunc(a, b, func(x, y peerslice.Peer) bool { return x.Equal(&y) })
}

// waitRecords waits until a namespace's slices hold exactly want.
func (l *ctlLab) waitRecords(ns string, want map[string]peerslice.Peer) {
	l.t.Helper()
	var got map[string]peerslice.Peer
	deadline := time.Now().Add(30 * time.Second)
	for {
		if got = l.records(ns); recordsEqual(got, want) {
			return
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("namespace %s: records\n%s\nwant\n%s", ns, dump(got), dump(want))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func dump(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// sliceWrites counts the PeerSlice writes the audit log holds, by user
// (namespace "" counts all namespaces).
func (l *ctlLab) sliceWrites(ns string) map[string]int {
	l.t.Helper()
	evs, err := l.srv.AuditEvents()
	if err != nil {
		l.t.Fatal(err)
	}
	out := map[string]int{}
	for _, ev := range evs {
		if ev.ObjectRef == nil || ev.ObjectRef.Resource != peerslice.Resource || (ns != "" && ev.ObjectRef.Namespace != ns) {
			continue
		}
		switch ev.Verb {
		case "create", "update", "patch", "delete", "deletecollection":
			if ev.ResponseStatus != nil && ev.ResponseStatus.Code < 300 {
				out[ev.User.Username]++
			}
		}
	}
	return out
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// ctlPod is a pod as the tests create it: labels app=NAME, node n1.
type ctlPod struct {
	ns, name string
	ips      []string
	ports    []corev1.ContainerPort
	hostNet  bool
	phase    corev1.PodPhase
}

func (l *ctlLab) createPod(p ctlPod) *corev1.Pod {
	l.t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: p.name, Labels: map[string]string{"app": p.name}},
		Spec: corev1.PodSpec{NodeName: "n1", HostNetwork: p.hostNet, Containers: []corev1.Container{{
			Name: "c", Image: "registry.k8s.io/pause:3.10", Ports: p.ports}}},
	}
	if len(p.ips) == 0 {
		out, err := l.admin.CoreV1().Pods(p.ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			l.t.Fatal(err)
		}
		return out
	}
	out, err := kubetest.CreateRunningPod(ctx, l.admin, pod, p.ips...)
	if err != nil {
		l.t.Fatal(err)
	}
	if p.phase != "" {
		out.Status.Phase = p.phase
		if out, err = l.admin.CoreV1().Pods(p.ns).UpdateStatus(ctx, out, metav1.UpdateOptions{}); err != nil {
			l.t.Fatal(err)
		}
	}
	return out
}

func (l *ctlLab) namespaces(names ...string) {
	l.t.Helper()
	if err := kubetest.CreateNamespaces(context.Background(), l.admin, names...); err != nil {
		l.t.Fatal(err)
	}
}

// relabel sets label v=VALUE on pods: a change of their records.
func (l *ctlLab) relabel(ns, value string, names ...string) {
	l.t.Helper()
	for _, n := range names {
		patch := fmt.Sprintf(`{"metadata":{"labels":{"v":%q}}}`, value)
		if _, err := l.admin.CoreV1().Pods(ns).Patch(context.Background(), n, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			l.t.Fatal(err)
		}
	}
}

// want is the record the controller must publish for a pod.
func want(name string, ips []string, lbl map[string]string, ports ...peerslice.Port) peerslice.Peer {
	if lbl == nil {
		lbl = map[string]string{"app": name}
	}
	return peerslice.Peer{Name: name, Node: "n1", IPs: ips, Labels: lbl, Ports: ports}
}

func namedPorts() []corev1.ContainerPort {
	return []corev1.ContainerPort{
		{Name: "web", ContainerPort: 8080},
		{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
		{Name: "metrics", ContainerPort: 9090},
	}
}

func portPolicy(ns, name, port string, egress bool) *networkingv1.NetworkPolicy {
	p := intstr.FromString(port)
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	ports := []networkingv1.NetworkPolicyPort{{Port: &p}}
	if egress {
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
		np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{Ports: ports}}
	} else {
		np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{Ports: ports}}
	}
	return np
}

var (
	webPort = peerslice.Port{Name: "web", Port: 8080}
	dnsPort = peerslice.Port{Name: "dns", Protocol: "UDP", Port: 53}
)

// TestControllerPublishes: the slices hold exactly the published records
// (no pod without an address, finished or on the host network; both
// families; only referenced port names), follow a NetworkPolicy and a
// ClusterNetworkPolicy that start (and stop) referring to a port name, cost no write for status writes that change
// no record, and are repaired after a hand edit, a forged record and a
// hand delete. It prints a slice's size as served and the size of the
// watch event a one-record change sends.
func TestControllerPublishes(t *testing.T) {
	l := newCtlLab(t)
	ctx := context.Background()
	l.namespaces("c37-pub", "c37-other")
	if _, err := l.admin.NetworkingV1().NetworkPolicies("c37-pub").Create(ctx, portPolicy("c37-pub", "web", "web", false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l.createPod(ctlPod{ns: "c37-pub", name: "a", ips: []string{"10.1.0.1"}, ports: namedPorts()})
	l.createPod(ctlPod{ns: "c37-pub", name: "b", ips: []string{"10.1.0.2", "fd00:1::2"}})
	l.createPod(ctlPod{ns: "c37-pub", name: "noip"})
	l.createPod(ctlPod{ns: "c37-pub", name: "done", ips: []string{"10.1.0.3"}, phase: corev1.PodSucceeded})
	l.createPod(ctlPod{ns: "c37-pub", name: "failed", ips: []string{"10.1.0.4"}, phase: corev1.PodFailed})
	l.createPod(ctlPod{ns: "c37-pub", name: "hostnet", ips: []string{"192.0.2.10"}, hostNet: true})
	l.createPod(ctlPod{ns: "c37-other", name: "c", ips: []string{"fd00:1::3"}, ports: namedPorts()})

	// The experimental channel: destinationNamedPort.
	if err := kubetest.InstallCNPCRD(ctx, l.srv.Config(kubetest.Admin), "experimental"); err != nil {
		t.Fatal(err)
	}
	c := l.start(ctlUsers[0], ctlOptions{})
	l.waitPublished(c.id, 30*time.Second)
	pub := map[string]peerslice.Peer{
		"a": want("a", []string{"10.1.0.1"}, nil, webPort),
		"b": want("b", []string{"10.1.0.2", "fd00:1::2"}, nil),
	}
	other := map[string]peerslice.Peer{"c": want("c", []string{"fd00:1::3"}, nil, webPort)}
	l.waitRecords("c37-pub", pub)
	l.waitRecords("c37-other", other)
	if got := c.metric("nftguard_controller_referenced_port_names"); got != 1 {
		t.Errorf("referenced_port_names %v, want 1", got)
	}

	t.Run("a policy starts referring to a port name", func(t *testing.T) {
		if _, err := l.admin.NetworkingV1().NetworkPolicies("c37-other").Create(ctx, portPolicy("c37-other", "dns", "dns", true), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pub["a"] = want("a", []string{"10.1.0.1"}, nil, webPort, dnsPort)
		other["c"] = want("c", []string{"fd00:1::3"}, nil, webPort, dnsPort)
		l.waitRecords("c37-pub", pub)
		l.waitRecords("c37-other", other)
	})

	t.Run("a ClusterNetworkPolicy refers to a port name", func(t *testing.T) {
		cnp := &cnpv1beta1.ClusterNetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "c37-metrics"},
			Spec: cnpv1beta1.ClusterNetworkPolicySpec{
				Tier: cnpv1beta1.AdminTier, Priority: 10,
				Subject: cnpv1beta1.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}},
				Egress: []cnpv1beta1.ClusterNetworkPolicyEgressRule{{
					Name: "metrics", Action: cnpv1beta1.ClusterNetworkPolicyRuleActionAccept,
					To:        []cnpv1beta1.ClusterNetworkPolicyEgressPeer{{Namespaces: &metav1.LabelSelector{}}},
					Protocols: []cnpv1beta1.ClusterNetworkPolicyProtocol{{DestinationNamedPort: "metrics"}},
				}},
			},
		}
		cnps := cnpclient.NewForConfigOrDie(l.srv.Config(kubetest.Admin)).PolicyV1beta1().ClusterNetworkPolicies()
		if _, err := cnps.Create(ctx, cnp, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		metrics := peerslice.Port{Name: "metrics", Port: 9090}
		pub["a"] = want("a", []string{"10.1.0.1"}, nil, webPort, dnsPort, metrics)
		other["c"] = want("c", []string{"fd00:1::3"}, nil, webPort, dnsPort, metrics)
		l.waitRecords("c37-pub", pub)
		l.waitRecords("c37-other", other)
		// When it goes, the name stays (controller/state.go, kept): a
		// policy deleted and created again in a loop costs no write.
		before := c.writes()
		for range 3 {
			if err := cnps.Delete(ctx, cnp.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := cnps.Create(ctx, cnp, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := cnps.Delete(ctx, cnp.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// Policies and pods are separate streams: wait until the
		// controller's cache has the deletion, then let a pod's write
		// show that the flushes after it are done.
		waitFor(t, 10*time.Second, "the controller sees the deletion", func() bool {
			_, err := cnps.Get(ctx, cnp.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
		l.createPod(ctlPod{ns: "c37-other", name: "after-cnp", ips: []string{"10.1.0.8"}})
		other["after-cnp"] = want("after-cnp", []string{"10.1.0.8"}, nil)
		l.waitRecords("c37-pub", pub)
		l.waitRecords("c37-other", other)
		if got := c.writes() - before; got != 1 {
			t.Errorf("a ClusterNetworkPolicy naming a port deleted and created 3 times: %d writes, want 1 (the new pod's)", got)
		}
		delete(other, "after-cnp")
		if err := l.admin.CoreV1().Pods("c37-other").Delete(ctx, "after-cnp", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
			t.Fatal(err)
		}
		l.waitRecords("c37-other", other)
	})

	t.Run("status writes that change no record cost no write", func(t *testing.T) {
		before, auditBefore := c.writes(), total(l.sliceWrites(""))
		const n = 20
		for i := range n {
			for _, name := range []string{"a", "b"} {
				p, err := l.admin.CoreV1().Pods("c37-pub").Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				// What a kubelet writes while nothing a record holds
				// changes: conditions, container statuses' times.
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
					LastTransitionTime: metav1.NewTime(time.Unix(int64(1e9+i), 0))}}
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Ready: true, RestartCount: int32(i), Image: "pause", ImageID: "x"}}
				if _, err := l.admin.CoreV1().Pods("c37-pub").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		// The Pod watch is one ordered stream: once a pod created after
		// the status writes is published, they have all been seen.
		l.createPod(ctlPod{ns: "c37-other", name: "sentinel", ips: []string{"10.1.0.9"}})
		other["sentinel"] = want("sentinel", []string{"10.1.0.9"}, nil)
		l.waitRecords("c37-other", other)
		waitFor(t, 10*time.Second, "the sentinel's write counted", func() bool { return c.writes() > before })
		wrote, audited := c.writes()-before, total(l.sliceWrites(""))-auditBefore
		t.Logf("%d kubelet-like status writes: %d slice writes by metric, %d in the audit log (the sentinel's one expected)", 2*n, wrote, audited)
		if wrote != 1 || audited != 1 {
			t.Errorf("status writes cost %d writes (metric), %d (audit log); want only the sentinel's 1", wrote, audited)
		}
	})

	t.Run("hand edits, a forged record and a hand delete are repaired", func(t *testing.T) {
		res := l.dyn.Resource(peerslice.GroupVersionResource).Namespace("c37-pub")
		s := l.slicesOf("c37-pub")[0]
		edited := s.DeepCopy()
		for i := range edited.Peers {
			edited.Peers[i].IPs = []string{"10.66.0.1"}
		}
		edited.Peers = append(edited.Peers, peerslice.Peer{Name: "forged", IPs: []string{"10.1.0.1"}, Labels: map[string]string{"app": "db"}})
		u, err := peerslice.ToUnstructured(edited)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := res.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		l.waitRecords("c37-pub", pub)
		for _, s := range l.slicesOf("c37-pub") {
			if err := res.Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		l.waitRecords("c37-pub", pub)
		// A slice created by hand with a forged record goes.
		forged := &peerslice.PeerSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "c37-other", Name: "c37-forged"},
			Peers: []peerslice.Peer{{Name: "forged", IPs: []string{"10.1.0.8"}, Labels: map[string]string{"app": "db"}}}}
		if u, err = peerslice.ToUnstructured(forged); err != nil {
			t.Fatal(err)
		}
		if _, err := l.dyn.Resource(peerslice.GroupVersionResource).Namespace("c37-other").Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		l.waitRecords("c37-other", other)
	})

	t.Run("sizes", func(t *testing.T) {
		measureSlice(t, l, "c37-pub", c)
	})
}

// served GETs a slice as JSON and returns its bytes and those of its
// metadata.managedFields.
func (l *ctlLab) served(ns, name string) (int, int) {
	l.t.Helper()
	raw, err := l.admin.CoreV1().RESTClient().Get().AbsPath("/apis/nftguard.io/v1alpha1/namespaces/" + ns + "/peerslices/" + name).DoRaw(context.Background())
	if err != nil {
		l.t.Fatal(err)
	}
	var obj struct {
		Metadata struct {
			ManagedFields json.RawMessage `json:"managedFields"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		l.t.Fatal(err)
	}
	return len(raw), len(obj.Metadata.ManagedFields)
}

// measureSlice prints a slice's bytes as served (JSON), its managedFields'
// share, the size of the watch event a one-record change sends, and, once
// the controller c is stopped (it would delete a slice it did not plan),
// the same records written by server-side apply.
func measureSlice(t *testing.T, l *ctlLab, ns string, c *ctl) {
	ctx := context.Background()
	cfg := l.srv.Config(kubetest.Admin)
	s := l.slicesOf(ns)[0]
	n, mf := l.served(ns, s.Name)
	t.Logf("slice %s/%s with %d records, written by Update: %d B as JSON, of which metadata.managedFields %d B", ns, s.Name, len(s.Peers), n, mf)

	// The watch event of a one-record change: what every agent receives.
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	url := fmt.Sprintf("%s/apis/nftguard.io/v1alpha1/namespaces/%s/peerslices?watch=1&resourceVersion=%s&fieldSelector=metadata.name=%s",
		cfg.Host, ns, s.ResourceVersion, s.Name)
	req, _ := http.NewRequestWithContext(wctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch: %s", resp.Status)
	}
	lines := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 1<<16), 1<<22)
		if sc.Scan() {
			lines <- len(sc.Bytes())
		}
		close(lines)
	}()
	l.relabel(ns, "one-change", s.Peers[0].Name)
	select {
	case n, ok := <-lines:
		if !ok {
			t.Fatal("watch ended without an event")
		}
		t.Logf("watch event of a one-record change (slice of %d records): %d B of JSON", len(s.Peers), n)
	case <-wctx.Done():
		t.Fatal("no watch event")
	}

	c.stop()
	s = l.slicesOf(ns)[0]
	n, mf = l.served(ns, s.Name)
	ssa := &peerslice.PeerSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c37-ssa"}, Peers: s.Peers}
	u, err := peerslice.ToUnstructured(ssa)
	if err != nil {
		t.Fatal(err)
	}
	data, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.dyn.Resource(peerslice.GroupVersionResource).Namespace(ns).Patch(ctx, "c37-ssa", types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: "nftguard-controller"}); err != nil {
		t.Fatal(err)
	}
	n2, mf2 := l.served(ns, "c37-ssa")
	t.Logf("the same %d records: by Update %d B (managedFields %d B), by server-side apply %d B (managedFields %d B)", len(s.Peers), n, mf, n2, mf2)
}

// TestControllerBatching: changes made within the batch delay cost one
// write per touched slice. The controller's clock is a fake one: no
// write happens until the test steps it.
func TestControllerBatching(t *testing.T) {
	l := newCtlLab(t)
	l.namespaces("c37-batch", "c37-sentinel")
	const pods = 40
	for i := range pods {
		l.createPod(ctlPod{ns: "c37-batch", name: fmt.Sprintf("p%02d", i), ips: []string{fmt.Sprintf("10.2.0.%d", i+1)}})
	}
	clk := clocktesting.NewFakeClock(time.Unix(1e9, 0))
	const delay = time.Hour // of the fake clock
	// Slices of 16, so that 10 changes fit in one.
	c := l.start(ctlUsers[0], ctlOptions{batchDelay: delay, clock: clk, slices: peerslice.Options{MaxPeers: 16, MaxBytes: 4096}})
	l.waitPublished(c.id, 30*time.Second)
	initial := l.slicesOf("c37-batch")
	// The full ones first: each round changes 10 records of them.
	slices.SortFunc(initial, func(a, b *peerslice.PeerSlice) int { return len(b.Peers) - len(a.Peers) })
	t.Logf("first reconcile: %d records in %d slices, %d writes", pods, len(initial), c.writes())
	sentinels := 0
	// seen waits until the controller has seen every pod change made so
	// far: the Pod watch is one ordered stream, and a new pod after them
	// raises the records gauge.
	seen := func() {
		sentinels++
		l.createPod(ctlPod{ns: "c37-sentinel", name: fmt.Sprintf("s%d", sentinels), ips: []string{fmt.Sprintf("10.3.0.%d", sentinels)}})
		waitFor(t, 30*time.Second, "the controller sees the sentinel", func() bool {
			return c.metric("nftguard_controller_records") == float64(pods+sentinels)
		})
	}
	for round, touch := range [][]int{{0}, {0, 1}} {
		// 10 changes in the touched slices, all within one delay.
		var names []string
		for _, si := range touch {
			for _, p := range initial[si].Peers[:10/len(touch)] {
				names = append(names, p.Name)
			}
		}
		before := l.sliceWrites("c37-batch")
		l.relabel("c37-batch", fmt.Sprint("round", round), names...)
		seen()
		if got := total(l.sliceWrites("c37-batch")) - total(before); got != 0 {
			t.Fatalf("round %d: %d writes before the delay passed", round, got)
		}
		waitFor(t, 30*time.Second, "the dispatcher waits for the delay", clk.HasWaiters)
		clk.Step(delay)
		wantRecs := map[string]peerslice.Peer{}
		for i := range pods {
			n := fmt.Sprintf("p%02d", i)
			wantRecs[n] = want(n, []string{fmt.Sprintf("10.2.0.%d", i+1)}, nil)
		}
		// Expected labels: the last round's relabel wins per pod.
		for r, tr := range [][]int{{0}, {0, 1}}[:round+1] {
			for _, si := range tr {
				for _, p := range initial[si].Peers[:10/len(tr)] {
					lbl := maps.Clone(wantRecs[p.Name].Labels)
					lbl["v"] = fmt.Sprint("round", r)
					w := wantRecs[p.Name]
					w.Labels = lbl
					wantRecs[p.Name] = w
				}
			}
		}
		l.waitRecords("c37-batch", wantRecs)
		got := total(l.sliceWrites("c37-batch")) - total(before)
		t.Logf("round %d: %d record changes in %d slices within the delay: %d writes", round, len(names), len(touch), got)
		if got != len(touch) {
			t.Errorf("round %d: %d writes, want %d (one per touched slice)", round, got, len(touch))
		}
	}
}

// TestControllerLeaders: two controllers at once, only the leader writes;
// the standby that takes over writes nothing on an unchanged cluster;
// a new leader after changes made while none ran writes only the changed
// slices; a killed leader (the binary, SIGKILL: the Lease is not released)
// is replaced once its Lease expires; a leader whose Lease is taken stops
// writing.
func TestControllerLeaders(t *testing.T) {
	l := newCtlLab(t)
	const nss, perNS = 5, 30
	for i := range nss {
		ns := fmt.Sprintf("c37-lead-%d", i)
		l.namespaces(ns)
		for j := range perNS {
			l.createPod(ctlPod{ns: ns, name: fmt.Sprintf("p%02d", j), ips: []string{fmt.Sprintf("10.4.%d.%d", i, j+1)}})
		}
	}
	countSlices := func() int {
		n := 0
		for i := range nss {
			n += len(l.slicesOf(fmt.Sprintf("c37-lead-%d", i)))
		}
		return n
	}

	// Two at once.
	a, b := l.start(ctlUsers[0], ctlOptions{}), l.start(ctlUsers[1], ctlOptions{})
	waitFor(t, 30*time.Second, "a leader publishes", func() bool {
		le := l.lease()
		return le != nil && le.Annotations[peerslice.AnnotationPublished] != ""
	})
	leader, standby := a, b
	if l.lease().Annotations[peerslice.AnnotationPublished] == b.id {
		leader, standby = b, a
	}
	writes := l.sliceWrites("")
	t.Logf("two controllers at once: %d pods, %d slices; writes by %s (leader) %d, by %s (standby) %d; leader gauges %v/%v",
		nss*perNS, countSlices(), leader.id, writes[leader.id], standby.id, writes[standby.id],
		leader.metric("nftguard_controller_leader"), standby.metric("nftguard_controller_leader"))
	if writes[standby.id] != 0 || standby.writes() != 0 || standby.metric("nftguard_controller_leader") != 0 || leader.metric("nftguard_controller_leader") != 1 {
		t.Errorf("the standby wrote or claims to lead")
	}
	if writes[leader.id] != countSlices() {
		t.Errorf("the leader made %d writes for %d slices", writes[leader.id], countSlices())
	}

	// The leader stops: the standby (warm caches) takes over.
	leader.stop()
	l.waitPublished(standby.id, 30*time.Second)
	writes = l.sliceWrites("")
	t.Logf("failover to the standby on an unchanged cluster: %d writes (metric %d)", writes[standby.id], standby.writes())
	if writes[standby.id] != 0 || standby.writes() != 0 {
		t.Errorf("the new leader wrote %d times on an unchanged cluster", writes[standby.id])
	}
	standby.stop()

	// Changes while no controller runs: one record in c37-lead-0, a pod
	// gone from c37-lead-1, a new pod in c37-lead-2, two records of one
	// slice in c37-lead-3.
	ctx := context.Background()
	l.relabel("c37-lead-0", "x", "p00")
	// No kubelet confirms a graceful deletion here: delete at once.
	if err := l.admin.CoreV1().Pods("c37-lead-1").Delete(ctx, "p00", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}
	l.createPod(ctlPod{ns: "c37-lead-2", name: "new", ips: []string{"10.4.2.100"}})
	s3 := l.slicesOf("c37-lead-3")[0]
	l.relabel("c37-lead-3", "x", s3.Peers[0].Name, s3.Peers[1].Name)
	const changedSlices = 4

	// A new leader: the binary, as the Deployment runs it.
	kc, err := l.srv.WriteKubeconfig(l.dir, ctlUsers[2])
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nftguardBin, "controller", "--kubeconfig", kc, "--identity", ctlUsers[2], "--metrics-addr", "0", "--log-format", "json")
	var logs syncBuffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	l.waitPublished(ctlUsers[2], 60*time.Second)
	writes = l.sliceWrites("")
	t.Logf("new leader (binary) after %d record changes in %d slices made while none ran: %d writes", 5, changedSlices, writes[ctlUsers[2]])
	if writes[ctlUsers[2]] != changedSlices {
		t.Errorf("new leader wrote %d times, want %d (the changed slices)\n%s", writes[ctlUsers[2]], changedSlices, logs.String())
	}

	// Killed: the Lease stays taken until it expires (15 s, the
	// binary's default); then another controller leads, and writes
	// nothing.
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	killed = true
	d := l.start(ctlUsers[3], ctlOptions{})
	l.waitPublished(d.id, 60*time.Second)
	writes = l.sliceWrites("")
	t.Logf("leader after the killed one: %d writes", writes[d.id])
	if writes[d.id] != 0 {
		t.Errorf("the leader after a kill wrote %d times on an unchanged cluster", writes[d.id])
	}
	// The Lease taken from under it (another holder, valid for an
	// hour): it stops leading, and a change it then sees costs no write.
	le := l.lease()
	le.Spec.HolderIdentity = ptr("c37-thief")
	le.Spec.LeaseDurationSeconds = ptr(int32(3600))
	le.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if _, err := l.admin.CoordinationV1().Leases("kube-system").Update(ctx, le, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the leader steps down", func() bool { return d.metric("nftguard_controller_leader") == 0 })
	dWrites := d.writes()
	records := d.metric("nftguard_controller_records")
	l.createPod(ctlPod{ns: "c37-lead-4", name: "unled", ips: []string{"10.4.4.200"}})
	waitFor(t, 30*time.Second, "the former leader sees the new pod", func() bool { return d.metric("nftguard_controller_records") == records+1 })
	if got := l.sliceWrites("")[d.id] - writes[d.id]; got != 0 || d.writes() != dWrites {
		t.Errorf("a controller that lost the Lease wrote %d times", got)
	}
	if err := l.admin.CoreV1().Pods("c37-lead-4").Delete(ctx, "unled", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}); err != nil {
		t.Fatal(err)
	}

	for _, s := range l.slicesOf("c37-lead-0") {
		n, mf := l.served("c37-lead-0", s.Name)
		t.Logf("slice of %d records as served: %d B, of which managedFields %d B", len(s.Peers), n, mf)
	}
	for i := range nss {
		if r := l.records(fmt.Sprintf("c37-lead-%d", i)); len(r) != perNS+map[int]int{1: -1, 2: 1}[i] {
			t.Errorf("c37-lead-%d: %d records", i, len(r))
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPeerSliceTrustBoundary: a namespace's admin cannot write PeerSlices
// (a record makes an address match selectors in every agent); the agent
// can read but not write them, and read only the controller's Lease; the
// API server refuses a slice its schema does not allow.
func TestPeerSliceTrustBoundary(t *testing.T) {
	const tenant, agentUser = "c37-tenant", "c37-agent"
	l := newCtlLab(t, tenant, agentUser)
	ctx := context.Background()
	l.namespaces("c37-tenant")
	aggregateRoles(t, l.admin, "admin", "edit")
	l.bind(tenant, "ClusterRole", "admin", "c37-tenant")
	l.bind(tenant, "ClusterRole", "edit", "c37-tenant")
	l.bind(agentUser, "ClusterRole", "nftguard", "")
	l.bind(agentUser, "Role", "nftguard", "kube-system")

	slice := func(name string, peers ...peerslice.Peer) *unstructured.Unstructured {
		u, err := peerslice.ToUnstructured(&peerslice.PeerSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "c37-tenant", Name: name}, Peers: peers})
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	good := peerslice.Peer{Name: "db", IPs: []string{"10.5.0.1"}, Labels: map[string]string{"app": "db"}}
	existing, err := l.dyn.Resource(peerslice.GroupVersionResource).Namespace("c37-tenant").Create(ctx, slice("real", good), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	for _, user := range []string{tenant, agentUser} {
		t.Run(user, func(t *testing.T) {
			res := dynamic.NewForConfigOrDie(l.srv.Config(user)).Resource(peerslice.GroupVersionResource).Namespace("c37-tenant")
			forbidden := func(what string, err error) {
				t.Helper()
				if !apierrors.IsForbidden(err) {
					t.Errorf("%s: %v, want Forbidden", what, err)
				}
			}
			_, err := res.Create(ctx, slice("forged", good), metav1.CreateOptions{})
			forbidden("create", err)
			upd := existing.DeepCopy()
			upd.Object["peers"] = []any{map[string]any{"name": "db", "ips": []any{"10.66.0.1"}}}
			_, err = res.Update(ctx, upd, metav1.UpdateOptions{})
			forbidden("update", err)
			_, err = res.Patch(ctx, "real", types.MergePatchType, []byte(`{"peers":[{"name":"db","ips":["10.66.0.1"]}]}`), metav1.PatchOptions{})
			forbidden("patch", err)
			forbidden("delete", res.Delete(ctx, "real", metav1.DeleteOptions{}))
			forbidden("deletecollection", res.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
		})
	}
	t.Run("the tenant's admin binding works", func(t *testing.T) {
		cs := kubernetes.NewForConfigOrDie(l.srv.Config(tenant))
		if _, err := cs.CoreV1().Pods("c37-tenant").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "mine"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}, metav1.CreateOptions{}); err != nil {
			t.Errorf("the tenant cannot create a pod in its namespace (the admin binding does not work): %v", err)
		}
	})
	t.Run("the agent reads", func(t *testing.T) {
		res := dynamic.NewForConfigOrDie(l.srv.Config(agentUser)).Resource(peerslice.GroupVersionResource)
		if _, err := res.List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("list: %v", err)
		}
		w, err := res.Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Errorf("watch: %v", err)
		} else {
			w.Stop()
		}
		if _, err := res.Namespace("c37-tenant").Get(ctx, "real", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("get: %v, want Forbidden (the agent only lists and watches)", err)
		}
		leases := kubernetes.NewForConfigOrDie(l.srv.Config(agentUser)).CoordinationV1().Leases("kube-system")
		for _, name := range []string{controller.DefaultLeaseName, "other"} {
			if _, err := l.admin.CoordinationV1().Leases("kube-system").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := leases.Get(ctx, controller.DefaultLeaseName, metav1.GetOptions{}); err != nil {
			t.Errorf("get the controller's Lease: %v", err)
		}
		if _, err := leases.Get(ctx, "other", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("get another Lease: %v, want Forbidden", err)
		}
		le, _ := leases.Get(ctx, controller.DefaultLeaseName, metav1.GetOptions{})
		if le != nil {
			if _, err := leases.Update(ctx, le, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
				t.Errorf("update the controller's Lease: %v, want Forbidden", err)
			}
		}
	})
	t.Run("schema", func(t *testing.T) {
		res := l.dyn.Resource(peerslice.GroupVersionResource).Namespace("c37-tenant")
		for name, p := range map[string]peerslice.Peer{
			"three-ips":  {Name: "x", IPs: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}},
			"no-ips":     {Name: "x"},
			"port-zero":  {Name: "x", IPs: []string{"10.0.0.1"}, Ports: []peerslice.Port{{Name: "web", Port: 0}}},
			"port-big":   {Name: "x", IPs: []string{"10.0.0.1"}, Ports: []peerslice.Port{{Name: "web", Port: 65536}}},
			"proto-tcp":  {Name: "x", IPs: []string{"10.0.0.1"}, Ports: []peerslice.Port{{Name: "web", Protocol: "TCP", Port: 80}}},
			"long-port":  {Name: "x", IPs: []string{"10.0.0.1"}, Ports: []peerslice.Port{{Name: "a-very-long-port-name", Port: 80}}},
			"empty-name": {IPs: []string{"10.0.0.1"}},
		} {
			_, err := res.Create(ctx, slice("bad-"+name, p), metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) {
				t.Errorf("%s: %v, want Invalid", name, err)
			}
		}
		u := slice("no-peers")
		delete(u.Object, "peers")
		if _, err := res.Create(ctx, u, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("no peers: %v, want Invalid", err)
		}
	})
}

// aggregateRoles fills the built-in aggregated ClusterRoles (admin, edit)
// as kube-controller-manager's aggregation controller does, which the test
// API server does not run: the union of the rules of every ClusterRole
// their selectors match. Without it they would grant nothing, and a test
// that a tenant bound to them cannot write would prove nothing.
func aggregateRoles(t *testing.T, cs kubernetes.Interface, names ...string) {
	t.Helper()
	ctx := context.Background()
	for _, name := range names {
		cr, err := cs.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cr.AggregationRule == nil {
			continue
		}
		var rules []rbacv1.PolicyRule
		for _, sel := range cr.AggregationRule.ClusterRoleSelectors {
			s, err := metav1.LabelSelectorAsSelector(&sel)
			if err != nil {
				t.Fatal(err)
			}
			list, err := cs.RbacV1().ClusterRoles().List(ctx, metav1.ListOptions{LabelSelector: s.String()})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range list.Items {
				if r.Name != name {
					rules = append(rules, r.Rules...)
				}
			}
		}
		cr.Rules = rules
		if _, err := cs.RbacV1().ClusterRoles().Update(ctx, cr, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if len(rules) == 0 {
			t.Fatalf("ClusterRole %s aggregates no rules", name)
		}
	}
}

// TestControllerPublishRate measures how long a leader takes to publish a
// cluster whose slices are all missing (the worst failover: a first
// install, or every slice deleted), at several client rate limits: the
// data behind the binary's 50 requests per second, bursts of 100. It
// asserts only the write count (one create per slice).
func TestControllerPublishRate(t *testing.T) {
	l := newCtlLabWith(t, false)
	const nss, perNS = 20, 100
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(func() *rest.Config {
		c := l.srv.Config(kubetest.Admin)
		c.QPS, c.Burst = 1000, 1000
		return c
	}())
	var wg sync.WaitGroup
	errs := make(chan error, nss)
	for i := range nss {
		ns := fmt.Sprintf("c37-rate-%d", i)
		l.namespaces(ns)
		wg.Go(func() {
			for j := range perNS {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("p%03d", j), Labels: map[string]string{"app": "x", "i": fmt.Sprint(j)}},
					Spec: corev1.PodSpec{NodeName: fmt.Sprintf("n%d", j%10), Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
				if _, err := kubetest.CreateRunningPod(ctx, cs, p, fmt.Sprintf("10.%d.%d.%d", 100+i, j/200, j%200+1)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for k, rate := range []struct {
		qps     float32
		burst   int
		workers int
	}{{50, 100, 4}, {200, 400, 4}, {200, 400, 16}} {
		for i := range nss {
			if err := l.dyn.Resource(peerslice.GroupVersionResource).Namespace(fmt.Sprintf("c37-rate-%d", i)).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		user := ctlUsers[k]
		start := time.Now()
		c := l.start(user, ctlOptions{qps: rate.qps, burst: rate.burst, workers: rate.workers, batchDelay: controller.DefaultBatchDelay})
		l.waitPublished(user, 5*time.Minute)
		took := time.Since(start)
		n := 0
		for i := range nss {
			n += len(l.slicesOf(fmt.Sprintf("c37-rate-%d", i)))
		}
		w := c.writes()
		t.Logf("QPS %v burst %d: %d pods, %d slices, %d writes published in %v (from start, with leader election and cache sync)",
			rate.qps, rate.burst, nss*perNS, n, w, took.Round(time.Millisecond))
		if w != n {
			t.Errorf("%d writes for %d slices", w, n)
		}

		// Churn: one record change per patch, spread over every
		// namespace, at a steady rate.
		const perSecond, seconds = 200, 10
		before := c.writes()
		hBefore := c.buckets("nftguard_controller_publish_delay_seconds")
		tick := time.NewTicker(time.Second / perSecond)
		churnStart := time.Now()
		for i := range perSecond * seconds {
			<-tick.C
			ns, pod := fmt.Sprintf("c37-rate-%d", i%nss), fmt.Sprintf("p%03d", (i/nss*7)%perNS)
			patch := fmt.Sprintf(`{"metadata":{"labels":{"v":"%d-%d"}}}`, k, i)
			go func() {
				if _, err := cs.CoreV1().Pods(ns).Patch(ctx, pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
					t.Error(err)
				}
			}()
		}
		tick.Stop()
		sent := time.Since(churnStart)
		waitFor(t, 5*time.Minute, "the churn is published", func() bool {
			return c.metric("nftguard_controller_dirty_namespaces") == 0 && c.writes() > before
		})
		p50, p99 := c.quantiles("nftguard_controller_publish_delay_seconds", hBefore, 0.5, 0.99)
		t.Logf("QPS %v burst %d, %d workers: %d record changes in %v: %d writes; publish delay (first change to written, batch delay 200ms) p50 <= %vs, p99 <= %vs",
			rate.qps, rate.burst, rate.workers, perSecond*seconds, sent.Round(time.Millisecond), c.writes()-before, p50, p99)
		c.stop()
	}
}

// buckets are a histogram's cumulative bucket counts, the last one the
// sample count.
func (c *ctl) buckets(name string) []uint64 {
	mfs, err := c.reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			h := mf.GetMetric()[0].GetHistogram()
			var out []uint64
			for _, b := range h.GetBucket() {
				out = append(out, b.GetCumulativeCount())
			}
			return append(out, h.GetSampleCount())
		}
	}
	panic("no histogram " + name)
}

// quantiles reads upper bounds of two quantiles from a histogram's
// buckets (+Inf when beyond the last bucket), over the observations since
// the counts before.
func (c *ctl) quantiles(name string, before []uint64, q1, q2 float64) (float64, float64) {
	now := c.buckets(name)
	mfs, _ := c.reg.Gather()
	var bounds []float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, b := range mf.GetMetric()[0].GetHistogram().GetBucket() {
				bounds = append(bounds, b.GetUpperBound())
			}
		}
	}
	n := float64(now[len(now)-1] - before[len(before)-1])
	q := func(q float64) float64 {
		for i, ub := range bounds {
			if float64(now[i]-before[i]) >= q*n {
				return ub
			}
		}
		return math.Inf(1)
	}
	return q(q1), q(q2)
}

// TestControllerScale: the binary, as the Deployment runs it, publishes a
// cluster whose slices are all missing with one create per slice and no
// other write, and a second one taking over (SIGTERM: the Lease is
// released) writes nothing. NFTGUARD_CONTROLLER_SCALE_PODS sets the pods
// (default 4,000, in namespaces of 200); it prints the binary's memory.
// A first plan made before the informers' handlers had processed their
// first list showed as updates at 20,000 pods.
func TestControllerScale(t *testing.T) {
	pods := 4000
	if v := os.Getenv("NFTGUARD_CONTROLLER_SCALE_PODS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 200 {
			t.Fatalf("NFTGUARD_CONTROLLER_SCALE_PODS=%q: want a number of pods >= 200", v)
		}
		pods = n
	}
	const perNS = 200
	nss := pods / perNS
	l := newCtlLabWith(t, false)
	ctx := context.Background()
	cfg := l.srv.Config(kubetest.Admin)
	cfg.QPS, cfg.Burst = 2000, 2000
	cs := kubernetes.NewForConfigOrDie(cfg)
	var wg sync.WaitGroup
	errs := make(chan error, nss)
	for i := range nss {
		ns := fmt.Sprintf("c37-scale-%d", i)
		l.namespaces(ns)
		wg.Go(func() {
			for j := range perNS {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("app-%d-%08d-abcde", j%20, j),
					Labels: map[string]string{"app": fmt.Sprintf("app-%d", j%20), "pod-template-hash": fmt.Sprintf("h%08d", j%20), "tier": "backend"}},
					Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%04d", j%500), Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9090}}}}}}
				if _, err := kubetest.CreateRunningPod(ctx, cs, p, fmt.Sprintf("10.%d.%d.%d", i%250, j/250, j%250+1)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	run := func(user string) (stop func(), scrape func() map[string]float64) {
		kc, err := l.srv.WriteKubeconfig(l.dir, user)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		cmd := exec.Command(nftguardBin, "controller", "--kubeconfig", kc, "--identity", user, "--metrics-addr", addr)
		var logs syncBuffer
		cmd.Stderr = &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := false
		stop = func() {
			if !done {
				done = true
				cmd.Process.Signal(os.Interrupt)
				cmd.Wait()
			}
		}
		t.Cleanup(func() {
			if !done {
				cmd.Process.Kill()
				cmd.Wait()
			}
			if t.Failed() {
				t.Logf("log of %s:\n%s", user, tailString(logs.String(), 6000))
			}
		})
		scrape = func() map[string]float64 {
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			out := map[string]float64{}
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				name, val, ok := strings.Cut(sc.Text(), " ")
				if !ok || strings.HasPrefix(name, "#") {
					continue
				}
				if v, err := strconv.ParseFloat(val, 64); err == nil {
					out[name] = v
				}
			}
			return out
		}
		return stop, scrape
	}

	start := time.Now()
	stop, scrape := run(ctlUsers[0])
	l.waitPublished(ctlUsers[0], 10*time.Minute)
	took := time.Since(start)
	m := scrape()
	creates, updates, deletes := m[`nftguard_controller_writes_total{op="create"}`], m[`nftguard_controller_writes_total{op="update"}`], m[`nftguard_controller_writes_total{op="delete"}`]
	t.Logf("%d pods: published in %v with %v creates, %v updates, %v deletes (%v slices); resident %.0f MB, heap in use %.0f MB",
		pods, took.Round(time.Millisecond), creates, updates, deletes, m["nftguard_controller_slices"],
		m["process_resident_memory_bytes"]/1e6, m["go_memstats_heap_inuse_bytes"]/1e6)
	per := peerslice.DefaultOptions().MaxPeers // the binary's slice size
	if want := float64(nss * ((perNS + per - 1) / per)); creates != want || updates != 0 || deletes != 0 {
		t.Errorf("first publish: %v creates (want %v), %v updates, %v deletes (want 0)", creates, want, updates, deletes)
	}
	stop()

	start = time.Now()
	_, scrape = run(ctlUsers[1])
	l.waitPublished(ctlUsers[1], 10*time.Minute)
	took = time.Since(start)
	m = scrape()
	writes := m[`nftguard_controller_writes_total{op="create"}`] + m[`nftguard_controller_writes_total{op="update"}`] + m[`nftguard_controller_writes_total{op="delete"}`]
	t.Logf("the next leader (a new process) on the unchanged cluster: published in %v with %v writes", took.Round(time.Millisecond), writes)
	if writes != 0 {
		t.Errorf("the next leader wrote %v times", writes)
	}
}
