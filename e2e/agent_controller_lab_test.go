package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/internal/childproc"
	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/peerslice"
)

// In slices mode the agent lab runs the real controller: deploy/crd.yaml
// and deploy/controller.yaml applied as an operator would, and
// `nftguard controller` as child processes of the test, each with the
// kubeconfig of a user bound to exactly the roles deploy/controller.yaml
// gives the controller's ServiceAccount.

// peerLease is the Lease the controllers elect their leader with and the
// agents read (both sides' default).
var peerLease = struct{ ns, name string }{"kube-system", "nftguard-controller"}

// labCtlLease is the lab controllers' --lease-duration: the agents call
// the records stale, and a standby takes over, 3s after the last renewal.
const labCtlLease = 3 * time.Second

// labCtlUser is the API user the lab's controllers run as.
const labCtlUser = "controller"

// ctlProc is one `nftguard controller` process.
type ctlProc struct {
	id      string
	addr    string // host:port of /metrics and /healthz
	logPath string
	proc    *childproc.Proc
}

// labPeerSource is the lab's --peer-source: the option, else the env
// NFTGUARD_E2E_PEER_SOURCE.
func labPeerSource(opt string) string {
	if opt != "" {
		return opt
	}
	return os.Getenv("NFTGUARD_E2E_PEER_SOURCE")
}

// setPeerSource prepares the lab for the agents' peer source (see
// agentLabOptions.peerSource).
func (a *agentLab) setPeerSource(t *testing.T, source string, controllers int) {
	t.Helper()
	switch source = labPeerSource(source); source {
	case "", "auto":
		// The agents' default; "auto" ignores the env: the test sets up
		// (or not) the CRD and the controller itself.
		return
	case "slices":
		a.deployController(t)
		if controllers == 0 {
			controllers = 1
		}
		start := time.Now()
		for range controllers {
			a.startController(t)
		}
		a.waitPublished(t)
		t.Logf("peer source slices: %d controller(s), the records published %v after the first started",
			controllers, time.Since(start).Round(time.Millisecond))
		// Quick to notice a Lease that is not renewed.
		a.args = append(a.args, "--controller-lease-check", "200ms")
	}
	a.args = append(a.args, "--peer-source", source)
}

// deployController applies deploy/crd.yaml and deploy/controller.yaml
// (server-side dry run first, then for real; the CRD waits until it is
// served) and binds labCtlUser to the controller's ClusterRole and its
// Role in kube-system, as deploy/controller.yaml binds the ServiceAccount.
func (a *agentLab) deployController(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	cfg := a.srv.Config(kubetest.Admin)
	for _, f := range []string{"crd.yaml", "controller.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "deploy", f))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kubetest.Apply(ctx, cfg, data, true); err != nil {
			t.Fatalf("deploy/%s (dry run): %v", f, err)
		}
		if f == "crd.yaml" {
			err = kubetest.InstallPeerSliceCRD(ctx, cfg)
		} else {
			_, err = kubetest.Apply(ctx, cfg, data, false)
		}
		if err != nil {
			t.Fatalf("deploy/%s: %v", f, err)
		}
	}
	a.bindLike(t, labCtlUser, "kube-system", "nftguard-controller")
}

// bindLike gives user every role the ServiceAccount ns/sa is bound to by
// the (Cluster)RoleBindings in the API server, with bindings of the same
// kind, role and namespace.
func (a *agentLab) bindLike(t *testing.T, user, ns, sa string) {
	t.Helper()
	ctx := context.Background()
	isSA := func(subjects []rbacv1.Subject) bool {
		for _, s := range subjects {
			if s.Kind == "ServiceAccount" && s.Namespace == ns && s.Name == sa {
				return true
			}
		}
		return false
	}
	crbs, err := a.admin.RbacV1().ClusterRoleBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bound := 0
	for _, b := range crbs.Items {
		if !isSA(b.Subjects) {
			continue
		}
		nb := b.DeepCopy()
		nb.ObjectMeta = metav1.ObjectMeta{Name: "lab-" + user + "-" + b.Name}
		nb.Subjects = []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}}
		if _, err := a.admin.RbacV1().ClusterRoleBindings().Create(ctx, nb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		bound++
	}
	rbs, err := a.admin.RbacV1().RoleBindings("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range rbs.Items {
		if !isSA(b.Subjects) {
			continue
		}
		nb := b.DeepCopy()
		nb.ObjectMeta = metav1.ObjectMeta{Namespace: b.Namespace, Name: "lab-" + user + "-" + b.Name}
		nb.Subjects = []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: user}}
		if _, err := a.admin.RbacV1().RoleBindings(b.Namespace).Create(ctx, nb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		bound++
	}
	if bound != 2 {
		t.Fatalf("%s/%s has %d bindings, want 2 (its ClusterRole and its Role for the Lease)", ns, sa, bound)
	}
}

// startController starts one more controller replica, ctl-N.
func (a *agentLab) startController(t *testing.T) *ctlProc {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("ctl-%d", len(a.ctls)+1)
	c := &ctlProc{id: id, addr: l.Addr().String(), logPath: filepath.Join(a.dir, "controller-"+id+".log")}
	l.Close()
	a.ctls = append(a.ctls, c)
	a.t.Cleanup(func() { c.kill(a.t) })
	a.runController(t, c)
	return c
}

// runController (re)starts c's process.
func (a *agentLab) runController(t *testing.T, c *ctlProc) {
	t.Helper()
	c.kill(t)
	kc, err := a.srv.WriteKubeconfig(a.dir, labCtlUser)
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(nftguardBin, "controller", "--kubeconfig", kc, "--identity", c.id,
		"--lease-duration", labCtlLease.String(), "--batch-delay", "50ms", "--metrics-addr", c.addr, "--log-format", "json")
	cmd.Stdout, cmd.Stderr = logf, logf
	if c.proc, err = childproc.Start(cmd); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "controller "+c.id+" serves metrics", func() bool {
		if c.proc.Exited() {
			t.Fatalf("controller %s exited: %v\n%s", c.id, c.proc.Err(), c.logTail())
		}
		return strings.Contains(c.metrics(), "nftguard_controller_leader")
	})
}

// kill SIGKILLs the process, if it runs, and waits for its exit.
func (c *ctlProc) kill(t *testing.T) { c.signal(t, syscall.SIGKILL) }

func (c *ctlProc) signal(t *testing.T, sig syscall.Signal) {
	if c.proc == nil || c.proc.Exited() {
		return
	}
	if err := c.proc.Signal(sig); err != nil {
		t.Errorf("signal controller %s: %v", c.id, err)
	}
	if sig == syscall.SIGKILL {
		<-c.proc.Done()
	}
}

// metrics is the controller's /metrics, "" when it does not answer.
func (c *ctlProc) metrics() string {
	resp, err := http.Get("http://" + c.addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return ""
	}
	return string(b)
}

func (c *ctlProc) metric(series string) float64 { return metricValue(c.metrics(), series) }

// writes is nftguard_controller_writes_total summed over its ops (-1 when
// the controller does not answer).
func (c *ctlProc) writes() float64 {
	m := c.metrics()
	if m == "" {
		return -1
	}
	sum := 0.0
	for _, op := range []string{"create", "update", "delete"} {
		sum += max(0, metricValue(m, `nftguard_controller_writes_total{op="`+op+`"}`))
	}
	return sum
}

func (c *ctlProc) logTail() string {
	ag := agentProc{logPath: c.logPath}
	return ag.logTail()
}

// leader is the controller that holds the Lease, by its metric; nil when
// none does.
func (a *agentLab) leader() *ctlProc {
	for _, c := range a.ctls {
		if c.proc != nil && !c.proc.Exited() && c.metric("nftguard_controller_leader") == 1 {
			return c
		}
	}
	return nil
}

// waitPublished waits until a leader has annotated the Lease: the records
// are complete.
func (a *agentLab) waitPublished(t *testing.T) {
	t.Helper()
	waitFor(t, 60*time.Second, "a controller publishes the records (Lease annotated)", func() bool {
		l, err := a.admin.CoordinationV1().Leases(peerLease.ns).Get(context.Background(), peerLease.name, metav1.GetOptions{})
		return err == nil && l.Annotations[peerslice.AnnotationPublished] != ""
	})
}

// ctlLogs is the tail of every controller's log, for a.logs().
func (a *agentLab) ctlLogs() string {
	var b strings.Builder
	for _, c := range a.ctls {
		fmt.Fprintf(&b, "--- controller %s log (tail) ---\n%s\n", c.id, c.logTail())
	}
	return b.String()
}
