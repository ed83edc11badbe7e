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
// is served, which the agent follows without a restart (see cnp.go). The
// engine's netlink monitor reports foreign changes to the table (drift),
// which the same loop repairs. Because the loop is the only writer, syncs
// never overlap and every metric describes one sync.
//
// The table is never removed by the agent: on shutdown it stays in force, so
// a restart or upgrade never opens the node (`nftguard cleanup` removes it).
//
// # Where things are
//
//	run.go             Run: the informers, the sync loop, retries
//	config.go          Config and its defaults
//	informers.go       the informer caches the table is compiled from, and
//	                   which changes mark the state dirty
//	strip.go           the informers' transform: only the fields the
//	                   compilers read, equal label sets shared
//	cnp.go             the ClusterNetworkPolicy CRD, followed without a
//	                   restart
//	debounce.go        when the loop syncs (leading edge, coalesced bursts),
//	                   and the arrival times behind event-to-kernel latency
//	syncer.go          one sync: compile, engine.Sync, metrics, the log line
//	quarantine.go      the objects the kernel refuses, found with
//	                   check-only batches and held back
//	events.go          Warning Events for problems and quarantined objects
//	health.go          what /readyz says
//	server.go          /healthz, /readyz and /metrics
//	metrics.go         the agent's own Prometheus registry
//	localpods.go       the warning when no pod is scheduled to this node
//	deniedlog.go       --log-denied: the NFLOG records logged with the pod
//	                   and the policy, and the journal
//	podindex.go        the address → pod index that resolves those records
//	deniedcounters.go  the drop counters as metrics
//	testhook.go        the e2e tests' kernel-refusal hook (build tag
//	                   nftguard_testhooks); testhook_off.go, its absence
package agent
