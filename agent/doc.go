// Package agent is the node agent behind `nftguard run`: it watches the
// Kubernetes API with shared informers, compiles the node's desired table
// with compose.Build and keeps the kernel equal to it through the engine.
//
// Data flows one way: informer events only mark the state dirty; a single
// sync loop (leading-edge: a change after a quiet moment is synced at once,
// bursts are coalesced; see debouncer) reads the informer caches, compiles
// and calls engine.Sync. When the kernel refuses a batch, the loop finds the
// refused objects with check-only batches and holds them back (see
// quarantine.go). ClusterNetworkPolicies are watched only while their CRD
// is served, which the agent follows without a restart (see cnp.go);
// ServiceCIDR objects, for egress, only when the API serves them and the
// ClusterRole allows it, never as a condition (see servicecidr.go). Problems
// become Warning Events once per problem in the cluster, not once per node
// (see events.go). The
// engine's netlink monitor reports foreign changes to the table (drift),
// which the same loop repairs. Because the loop is the only writer, syncs
// never overlap and every metric describes one sync.
//
// The table is never removed by the agent: on shutdown it stays in force, so
// a restart or upgrade never opens the node (`nftguard cleanup` removes it).
package agent
