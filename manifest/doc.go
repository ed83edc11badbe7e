// Package manifest reads Kubernetes manifests (YAML or JSON, several
// documents per file, files or directories) into the typed API objects that
// nftguard's compilers read, for the one-shot commands that run without an
// API server.
//
// Reading is strict, like `kubectl apply --validate=strict`, and it is all or
// nothing: input that cannot be decoded completely (a syntax error anywhere,
// an unknown or duplicate field, a known kind with an apiVersion nftguard
// does not read, a document that is not an object, a YAML document whose
// aliases would expand it beyond maxExpansion times its size) makes Load
// return an *InputError and no objects, so a caller changes nothing rather
// than enforce a guess. A well-formed object whose metadata the API server
// would refuse (an invalid name, namespace, label or annotation key) is a
// Problem: it is left out and the rest is returned, as the compilers do
// with objects they cannot compile. So is a NetworkPolicy with an ipBlock
// the API server refuses on create but still serves from before its strict
// validation (leading zeros, an IPv4-mapped IPv6 address, bits beyond the
// prefix length), or with a label selector value no label can have (in
// matchExpressions, accepted before Kubernetes 1.27): the compiler reads
// those leniently, as Kubernetes components read a stored object, and a
// manifest is refused them here (create.go). A NetworkPolicy left out is
// still returned, in its fail-closed form (policy.FailClosedInvalid: its
// pods stay isolated, none of its rules), unless its namespace is not a
// valid name: a mistake in a policy must not open the pods it isolates. A ClusterNetworkPolicy's
// schema never checks selector values, so it is read like a stored
// NetworkPolicy.
//
// Every kind is read in one apiVersion, except ClusterNetworkPolicy
// (policy.networking.k8s.io), which the API server serves as v1beta1 and
// v1alpha2 with one schema: both are read, and v1alpha2 is converted to
// v1beta1 (see cnp.go).
//
// # Where things are
//
// Reading goes file → documents → scanned JSON → lined-up documents →
// decoded objects → Objects, one file per step:
//
//	load.go      Load: paths to files, the reader that accumulates what
//	             is read, and an object given again replacing the earlier
//	             one
//	file.go      a file into documents: a JSON stream, or YAML documents
//	             split on "---" lines and converted to JSON in parallel
//	             (with the path of a duplicate key for the message)
//	alias.go     the bound on YAML aliases: a document's converted size
//	             measured on its parsed tree before it is expanded
//	scan.go      the JSON scanner: syntax, and where each document's
//	             apiVersion, kind and List items are
//	document.go  a scanned document (or a List's items) lined up for
//	             decoding by its kind and apiVersion, or refused
//	kinds.go     the kinds read, their apiVersions, name rules and strict
//	             decoders
//	cnp.go       ClusterNetworkPolicy v1alpha2 read as v1beta1
//	decode.go    strict decoding of the lined-up documents, on every
//	             processor
//	meta.go      metadata validated as the API server validates it
//	create.go    what else the API server refuses on create but serves
//	             from before: NetworkPolicy ipBlocks in other than strict
//	             form, selector values no label can have
//	objects.go   what Load returns: Objects (with each one's source) and
//	             InputError
package manifest
