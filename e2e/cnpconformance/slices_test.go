package cnpconformance

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nftguard/nftguard/internal/childproc"
	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/peerslice"
)

// peerSource is the agents' --peer-source for the run: NFTGUARD_E2E_PEER_SOURCE
// (as the e2e agent lab reads it). "slices" deploys nftguard's controller
// (deploy/crd.yaml, deploy/controller.yaml, `nftguard controller` as a
// user bound like its ServiceAccount) before the agents start; every pod of
// another node then reaches an agent only through a PeerSlice record.
func peerSource() string { return os.Getenv("NFTGUARD_E2E_PEER_SOURCE") }

// controllerUser is the API user the controller runs as.
const controllerUser = "controller"

// deployController applies deploy/crd.yaml and deploy/controller.yaml,
// binds controllerUser as deploy/controller.yaml binds the controller's
// ServiceAccount and the agents' users to deploy/rbac.yaml's Role for the
// Lease, starts `nftguard controller` and waits until its Lease says the
// records are published. The controller is killed when the test ends.
func deployController(ctx context.Context, t *testing.T, srv *kubetest.Server, cfg *rest.Config, cs kubernetes.Interface, bin, dir string, agentUsers []string) {
	t.Helper()
	for _, f := range []string{"crd.yaml", "controller.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "deploy", f))
		if err != nil {
			t.Fatal(err)
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
	user := func(names ...string) []rbacv1.Subject {
		var out []rbacv1.Subject
		for _, n := range names {
			out = append(out, rbacv1.Subject{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: n})
		}
		return out
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "nftguard-conformance-controller"}, Subjects: user(controllerUser),
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "nftguard-controller"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, rb := range []struct {
		name, role string
		subjects   []rbacv1.Subject
	}{
		{"nftguard-conformance-controller", "nftguard-controller", user(controllerUser)},
		{"nftguard-conformance-agents", "nftguard", user(agentUsers...)},
	} {
		if _, err := cs.RbacV1().RoleBindings("kube-system").Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: rb.name}, Subjects: rb.subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: rb.role},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kc, err := srv.WriteKubeconfig(dir, controllerUser)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	logPath := filepath.Join(dir, "controller.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "controller", "--kubeconfig", kc, "--identity", "ctl-1", "--batch-delay", "50ms",
		"--metrics-addr", addr, "--log-format", "json")
	cmd.Stdout, cmd.Stderr = logf, logf
	p, err := childproc.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("controller exited: %v", p.Err())
		}
		l, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, "nftguard-controller", metav1.GetOptions{})
		return err == nil && l.Annotations[peerslice.AnnotationPublished] != "", nil
	})
	if err != nil {
		out, _ := os.ReadFile(logPath)
		t.Fatalf("the controller did not publish: %v\n%s", err, out)
	}
}
