package manifest

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	cnpv1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// ClusterNetworkPolicy is served as v1beta1 (the storage version) and
// v1alpha2 with the same schema, and the CRD declares no conversion
// webhook: the API server converts between them by rewriting apiVersion
// and nothing else. The reader converts the same way, through JSON: a
// v1alpha2 document is decoded strictly against the v1alpha2 types (so an
// error names the field as its author wrote it), encoded again, and decoded
// strictly into v1beta1. A hand-written field-by-field copy would have to
// follow every field the module adds; the JSON round trip follows them by
// itself, and TestCNPSchemasIdentical fails when a module upgrade makes the
// two versions differ, which is when a real conversion becomes necessary.

// decodeCNPv1alpha2 decodes a v1alpha2 ClusterNetworkPolicy strictly and
// returns it as v1beta1.
func decodeCNPv1alpha2(data []byte) (any, *metav1.ObjectMeta, []error) {
	obj, _, errs := decodeAs(func(o *cnpv1alpha2.ClusterNetworkPolicy) *metav1.ObjectMeta { return &o.ObjectMeta })(data)
	if len(errs) > 0 {
		return nil, nil, errs
	}
	out, err := CNPFromV1alpha2(obj.(*cnpv1alpha2.ClusterNetworkPolicy))
	if err != nil {
		return nil, nil, []error{err}
	}
	return out, &out.ObjectMeta, nil
}

// CNPFromV1alpha2 converts a v1alpha2 ClusterNetworkPolicy to v1beta1, as
// the API server does for this CRD (the schemas are identical; only
// apiVersion changes). It fails only if the module's two versions have
// diverged.
func CNPFromV1alpha2(in *cnpv1alpha2.ClusterNetworkPolicy) (*cnpv1beta1.ClusterNetworkPolicy, error) {
	data, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("convert ClusterNetworkPolicy to %s: %w", CNPV1beta1, err)
	}
	out := new(cnpv1beta1.ClusterNetworkPolicy)
	strictErrs, err := kjson.UnmarshalStrict(data, out)
	if err == nil && len(strictErrs) > 0 {
		err = strictErrs[0]
	}
	if err != nil {
		return nil, fmt.Errorf("convert ClusterNetworkPolicy to %s: %w", CNPV1beta1, err)
	}
	out.APIVersion, out.Kind = CNPV1beta1, "ClusterNetworkPolicy"
	return out, nil
}
