// Package podset holds the cluster's pods as the compilers read them: one
// compact record per pod (Pod) instead of the API object, grouped by
// namespace in an immutable Set.
//
// Every node agent holds every pod of the cluster, because a peer selector
// may name any of them: at 150,000 pods the API object alone (1,280 bytes
// of struct before any string) would be most of the agent's memory. A Pod
// keeps only what a policy or egress compiler reads: identity, labels, the
// node, whether the pod owns its address, the addresses and the named
// container ports a port name can resolve to (the containers', then the
// sidecars', as Kubernetes resolves them: see NamedPorts).
//
// A Set groups pods by namespace (it is an nsgroup.Set). Replacing the pods of some namespaces
// gives a new Set that shares every other Group with the old one, so a
// compiler that remembers the Groups it saw can tell, by identity and
// without looking at a pod, which namespaces an event touched. That is
// what makes the cost of one pod event independent of the cluster's size.
//
//	pods.go  Pod and Port: the compact record, made from the API object
//	         (FromAPI), and its named-port lookup
//	set.go   Set and Group: pods by namespace, sharing unchanged Groups;
//	         Converter, which reuses the records of unchanged pods
package podset
