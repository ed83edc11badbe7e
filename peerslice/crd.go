package peerslice

import _ "embed"

// CRD is the CustomResourceDefinition of PeerSlice, as YAML: what
// deploy/crd.yaml holds and tests install.
//
//go:embed crd.yaml
var crd []byte

// CRD returns the CustomResourceDefinition as YAML.
func CRD() []byte { return append([]byte(nil), crd...) }
