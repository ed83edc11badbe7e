package kubetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/nftguard/nftguard/peerslice"
)

// CNPModule is the module that defines ClusterNetworkPolicy; its CRDs are
// read from the version go.mod requires, so the test API server serves
// exactly the schema the compiler was built against.
const CNPModule = "sigs.k8s.io/network-policy-api"

// CNPCRDName is the CustomResourceDefinition's name.
const CNPCRDName = "clusternetworkpolicies.policy.networking.k8s.io"

// ModuleDir returns the directory of a module of the build list, as
// `go list -m` reports it (the module cache; downloaded if needed).
func ModuleDir(module string) (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return "", fmt.Errorf("go list -m %s: %w: %s", module, err, ee.Stderr)
		}
		return "", fmt.Errorf("go list -m %s: %w", module, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		// Not downloaded yet: go list -m prints no directory then.
		if out, err := exec.Command("go", "mod", "download", module).CombinedOutput(); err != nil {
			return "", fmt.Errorf("go mod download %s: %w: %s", module, err, out)
		}
		return ModuleDir(module)
	}
	return dir, nil
}

// CNPCRD returns the ClusterNetworkPolicy CRD manifest of one release
// channel, "standard" or "experimental" (which adds the experimental
// fields: nodes and domainNames peers, named ports).
func CNPCRD(channel string) ([]byte, error) {
	if channel != "standard" && channel != "experimental" {
		return nil, fmt.Errorf("CRD channel %q: want standard or experimental", channel)
	}
	dir, err := ModuleDir(CNPModule)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(dir, "config", "crd", channel, "policy.networking.k8s.io_clusternetworkpolicies.yaml"))
}

var cnpResource = schema.GroupVersionResource{Group: "policy.networking.k8s.io", Version: "v1beta1", Resource: "clusternetworkpolicies"}

// InstallCNPCRD installs the ClusterNetworkPolicy CRD of a channel and
// waits until the API server serves the resource.
func InstallCNPCRD(ctx context.Context, cfg *rest.Config, channel string) error {
	crd, err := CNPCRD(channel)
	if err != nil {
		return err
	}
	if _, err := Apply(ctx, cfg, crd, false); err != nil {
		return fmt.Errorf("install ClusterNetworkPolicy CRD: %w", err)
	}
	return waitServed(ctx, cfg, cnpResource)
}

// RemoveCNPCRD deletes the ClusterNetworkPolicy CRD (and with it every
// ClusterNetworkPolicy) and waits until the resource is gone.
func RemoveCNPCRD(ctx context.Context, cfg *rest.Config) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if err := crds.Delete(ctx, CNPCRDName, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("delete CRD %s: %w", CNPCRDName, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, err := crds.Get(ctx, CNPCRDName, metav1.GetOptions{}); err == nil {
			return false, nil
		}
		// The CRD object goes before the API server stops serving the
		// resource: wait for that too.
		_, err := dyn.Resource(cnpResource).List(ctx, metav1.ListOptions{Limit: 1})
		return err != nil, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s still present: %w", CNPCRDName, err)
	}
	return nil
}

// InstallPeerSliceCRD installs nftguard's PeerSlice CRD (peerslice.CRD, as
// deploy/crd.yaml holds it) and waits until the API server serves the
// resource.
func InstallPeerSliceCRD(ctx context.Context, cfg *rest.Config) error {
	if _, err := Apply(ctx, cfg, peerslice.CRD(), false); err != nil {
		return fmt.Errorf("install PeerSlice CRD: %w", err)
	}
	return waitServed(ctx, cfg, peerslice.GroupVersionResource)
}

// waitServed waits until a list of a resource succeeds: Established is not
// enough, a list can still 404 for a moment while the API server's
// handlers catch up.
func waitServed(ctx context.Context, cfg *rest.Config, gvr schema.GroupVersionResource) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, err := dc.ServerResourcesForGroupVersion(gvr.GroupVersion().String()); err != nil {
			return false, nil
		}
		_, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("%s not served: %w", gvr.GroupResource(), err)
	}
	return nil
}
