// Package controller is `nftguard controller`: it watches Pods once for the
// whole cluster and publishes each pod's compact record (package
// peerslice) as PeerSlices, which agents watch instead of every Pod.
//
// What it does, and why:
//
//   - Replicas elect a leader with a coordination.k8s.io Lease (client-go
//     leaderelection). Only the leader writes; on losing the Lease its
//     context ends, every write in flight is cancelled, and it becomes a
//     candidate again. Standbys keep their informers running, so a
//     failover starts from warm caches.
//   - The informers keep little: a Pod becomes its podset record as it
//     enters the cache (the API object is dropped), a NetworkPolicy or
//     ClusterNetworkPolicy the port names it refers to, a PeerSlice its
//     typed form without managedFields. ClusterNetworkPolicies are watched
//     only while discovery says they are served (as the agent decides).
//   - state.go (pure) holds the desired records by namespace. A Pod event
//     dirties its namespace only if the record changed: most kubelet status
//     writes change nothing a record holds. A change of the set of
//     referenced port names dirties the namespaces whose records it
//     changes.
//   - batch.go (pure) flushes a dirty namespace BatchDelay after the first
//     change that dirtied it; later changes join the flush without
//     postponing it, so the delay batching adds is bounded. A namespace is
//     never flushed by two workers at once.
//   - A flush plans the namespace (peerslice.Plan) and makes its writes in
//     order: creates, updates (with the planned resourceVersion), deletes
//     (with a resourceVersion precondition). A conflict or a missing slice
//     re-reads that slice and plans again.
//   - overlay.go (pure) covers the informer's lag: the controller plans
//     from the newer of its cache and its own last writes, so a flush right
//     after a write neither creates a second slice nor writes again. A
//     slice event that is not an echo of its own writes (a hand edit or
//     delete, another writer) dirties the namespace: the next plan repairs
//     it, and costs nothing if the slice is right.
//   - A new leader waits for complete caches, plans every namespace
//     against the slices it finds (an unchanged cluster costs no write),
//     and then sets peerslice.AnnotationPublished on the Lease.
//
// Trust boundary: a record makes its addresses match the selectors of
// every agent, so only the controller's ServiceAccount may write
// PeerSlices (deploy/controller.yaml). A tenant who could write one could
// make an address of theirs look like any pod.
package controller
