// Package selection answers the questions every Kubernetes policy compiler
// asks of the cluster, in one place: which pods and which namespaces a pair
// of label selectors selects, what a named port is on a pod, and which pods
// are on this node. The NetworkPolicy compiler (policy/) uses it, and so
// must every other compiler that selects pods (ClusterNetworkPolicy), so
// that they can never disagree about a selector.
//
// It is pure and knows no policy kind: selectors, namespaces and pods go
// in, pods and namespaces come out. Only the pieces of the Kubernetes API
// every selecting policy shares appear here (label selectors, the
// kubernetes.io/metadata.name label, container ports).
//
// # Selectors an API server stored
//
// A label selector is read as metav1.LabelSelectorAsSelector reads it,
// except for one thing API servers before Kubernetes 1.27 stored in
// NetworkPolicies (and still serve) and a ClusterNetworkPolicy's schema
// never checks: In and NotIn values that no label can have (AsSelector).
// Since no object carries such a value, it is read as selecting nothing,
// not refused: refusing it would leave the policy out and lift the
// isolation of the pods it selects.
//
// # One compile, and the next
//
// A Memo keeps what one compile derived for the next; Memo.Index starts a
// compile and returns its Index, the cluster's pods grouped by namespace.
// Index.Select evaluates a namespaceSelector and podSelector pair once per
// compile, and reuses the previous compile's answer when no namespace it
// looked at changed. In a namespace whose pods changed, it drops from its
// previous answer the pods that went and matches only the pods that came
// (the walk of the new group says which), so a pod event costs each
// selection the event's pods, not the namespace's: with 1,000 selectors
// selecting in a namespace of 10,000 pods, not 10 million matches. Pods come as a podset.Set: a namespace whose Group
// is the previous compile's is not looked at again, so an event costs the
// namespaces it touched, not the cluster's pods. Within a new Group, and
// for namespaces and policies, objects are compared by identity, as
// informer caches hand them out: a changed object must be a new object.
//
// # What counts as a pod
//
// A pod is selected, and enforced, only while it owns its addresses:
// terminated pods (Succeeded, Failed) and hostNetwork pods (whose address
// is the node's) are left out, as are pods without an address. A pod with
// an address that does not parse is reported as a problem and left out.
// Pods that share a namespace and name (never from an informer, possible
// in manifests) count once, as the first one in input order.
//
// # Where things are
//
//	index.go      Memo and Index: one compile's view of namespaces and
//	              pods, Select and what the previous compile derived
//	pods.go       Member (a pod that counts: its podset.Pod record with
//	              its addresses as text), the per-namespace pod buckets,
//	              and which pods count
//	selectors.go  AsSelector, and Selectors: label selectors parsed once
//	              per content
package selection
