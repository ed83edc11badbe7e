// Package peerslice is the API of the compact peer records nftguard's
// controller publishes and its agents read instead of watching every Pod of
// the cluster.
//
// A PeerSlice (group nftguard.io, version v1alpha1, namespaced) holds the
// records of some pods of its own namespace: for each pod exactly what
// policy needs of a pod that is not on the reader's node — its name, node,
// addresses, labels, and the named ports some policy refers to. A pod that
// has no address, has finished, or uses its node's network is not
// published: the compilers never select such a pod as a remote peer.
//
// The namespace of a record is its slice's: a record cannot speak for a pod
// of another namespace, and only the controller may write slices (RBAC), so
// a tenant who can run pods cannot forge a peer.
//
// What is pure here, and shared by the controller and the agent:
//
//	types.go    the API types, the resource's names, deep copies, and the
//	            conversion from the dynamic client's objects
//	crd.go      the CustomResourceDefinition (crd.yaml), validated by the
//	            API server
//	record.go   a pod record to a Peer and back, with named ports cut to
//	            those some policy refers to
//	plan.go     the writes that turn one namespace's slices into its
//	            desired records: a record stays in its slice, new records
//	            join slices already being written, slices stay small
package peerslice
