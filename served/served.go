// Package served asks the API server's discovery which version of a
// resource it serves. The agent and the controller follow CRDs that may be
// installed, upgraded or removed while they run (ClusterNetworkPolicy,
// PeerSlice), and both must tell "not served" (a definite answer) from
// "cannot tell" (an unreachable API server says nothing about a CRD).
//
// Discovery (GET /apis/GROUP/VERSION) is readable by every authenticated
// client: no RBAC on CustomResourceDefinitions is needed.
package served

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
)

// Version returns the first of versions in which group serves resource
// (its plural name, as discovery lists it), "" when none does, or an error
// when discovery cannot tell.
func Version(disc discovery.DiscoveryInterface, group, resource string, versions ...string) (string, error) {
	for _, v := range versions {
		gv := group + "/" + v
		list, err := disc.ServerResourcesForGroupVersion(gv)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("discover %s: %w", gv, err)
		}
		for _, r := range list.APIResources {
			if r.Name == resource {
				return v, nil
			}
		}
	}
	return "", nil
}
