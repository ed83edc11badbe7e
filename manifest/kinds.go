package manifest

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	cnpv1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/problem"
)

// kind is what the reader knows about one kind it reads.
type kind struct {
	apiVersion string
	namespaced bool
	// name validates metadata.name as the API server does for this kind.
	name apivalidation.ValidateNameFunc
	// decode decodes a document strictly and returns the object's metadata.
	decode decodeFunc
	// also are further apiVersions the kind is read in, each with its
	// decoder, which returns the object converted to apiVersion.
	also map[string]decodeFunc
}

type decodeFunc func(data []byte) (any, *metav1.ObjectMeta, []error)

// decoder returns the decoder of apiVersion, or nil when the kind is not
// read in that version.
func (k kind) decoder(apiVersion string) decodeFunc {
	if apiVersion == k.apiVersion {
		return k.decode
	}
	return k.also[apiVersion]
}

// versions lists the apiVersions the kind is read in, for messages.
func (k kind) versions() string {
	vs := []string{k.apiVersion}
	for v := range k.also {
		vs = append(vs, v)
	}
	sort.Strings(vs[1:])
	return strings.Join(vs, " or ")
}

func decodeAs[T any](meta func(*T) *metav1.ObjectMeta) decodeFunc {
	return func(data []byte) (any, *metav1.ObjectMeta, []error) {
		o := new(T)
		// UnmarshalStrict is what the API machinery's strict serializer
		// uses: case-sensitive, unknown and duplicate fields are errors
		// that carry the field path.
		strictErrs, err := kjson.UnmarshalStrict(data, o)
		if err != nil {
			return nil, nil, []error{err}
		}
		if len(strictErrs) > 0 {
			return nil, nil, strictErrs
		}
		return o, meta(o), nil
	}
}

// kinds are the kinds nftguard reads, with the name rules of the API
// server's validation for each (Services are DNS-1035 labels, Namespaces
// DNS-1123 labels, the others DNS-1123 subdomains).
var kinds = map[string]kind{
	"Namespace": {problem.CoreV1, false, apivalidation.ValidateNamespaceName,
		decodeAs(func(o *corev1.Namespace) *metav1.ObjectMeta { return &o.ObjectMeta }), nil},
	"Node": {problem.CoreV1, false, apivalidation.NameIsDNSSubdomain,
		decodeAs(func(o *corev1.Node) *metav1.ObjectMeta { return &o.ObjectMeta }), nil},
	"Pod": {problem.CoreV1, true, apivalidation.NameIsDNSSubdomain,
		decodeAs(func(o *corev1.Pod) *metav1.ObjectMeta { return &o.ObjectMeta }), nil},
	"Service": {problem.CoreV1, true, apivalidation.NameIsDNS1035Label,
		decodeAs(func(o *corev1.Service) *metav1.ObjectMeta { return &o.ObjectMeta }), nil},
	"NetworkPolicy": {problem.NetworkingV1, true, apivalidation.NameIsDNSSubdomain,
		decodeAs(func(o *networkingv1.NetworkPolicy) *metav1.ObjectMeta { return &o.ObjectMeta }), nil},
	"EndpointSlice": {problem.DiscoveryV1, true, apivalidation.NameIsDNSSubdomain,
		decodeAs(func(o *discoveryv1.EndpointSlice) *metav1.ObjectMeta { return &o.ObjectMeta }), nil},
	// A custom resource: the API server validates its name as a DNS-1123
	// subdomain, and it is cluster-scoped.
	"ClusterNetworkPolicy": {CNPV1beta1, false, apivalidation.NameIsDNSSubdomain,
		decodeAs(func(o *cnpv1beta1.ClusterNetworkPolicy) *metav1.ObjectMeta { return &o.ObjectMeta }),
		map[string]decodeFunc{CNPV1alpha2: decodeCNPv1alpha2}},
}

// The served versions of ClusterNetworkPolicy (sigs.k8s.io/network-policy-api
// v0.3.0): v1beta1 is the storage version, v1alpha2 has the same schema.
var (
	CNPV1beta1  = cnpv1beta1.GroupVersion.String()
	CNPV1alpha2 = cnpv1alpha2.GroupVersion.String()
)

// kubernetesGroup says whether apiVersion names a group of the Kubernetes
// API itself (core, a group without a dot such as "extensions", or one
// under k8s.io), where a kind nftguard reads in a version it does not read
// is a mistake rather than somebody else's resource.
func kubernetesGroup(apiVersion string) bool {
	group, _, found := strings.Cut(apiVersion, "/")
	if !found {
		return true
	}
	return !strings.Contains(group, ".") || group == "k8s.io" || strings.HasSuffix(group, ".k8s.io")
}
