// Package deniedflow is the node agent's account of denied packets, for
// `nftguard run --log-denied`: it reads the NFLOG group the table logs
// to (package flowlog), names the pods and the policies that decided each
// record from the agent's informer caches, writes one slog record per
// denied packet (JSON with --log-format json), keeps the recent ones in a
// bounded journal, and exports the kernel's drop counters as Prometheus
// metrics. The table side is policy.Input.LogDenied (through
// compose.Input.LogDenied); the agent starts Run and hands Resolver the
// input of every successful sync.
//
// Reading the log is an aid, not enforcement: nothing here writes to the
// table, and the agent goes on enforcing when Run fails (another reader
// holds the group).
//
// Which policies isolate a pod is answered by flowlog.IsolatingPolicies,
// the one definition `nftguard flows` uses too; the pod is found by
// address through an index of the pod informer's own store (podindex.go),
// so a record is resolved against exactly the pods the cache holds, in
// O(1). A ClusterNetworkPolicy Deny rule is named by evaluating the flow
// on the input of the last successful sync: the rules of the table that
// dropped the packet.
//
//	log.go        Metrics (records, suppressed), Run: read, resolve, log,
//	              journal and count each record; the record's slog attributes
//	resolver.go   Resolver (a flowlog.Resolver and ClusterDenier over the
//	              informer caches) and the per-sync explain.Cluster
//	podindex.go   IndexPodAddrs: the address -> pod index on the pod informer
//	counters.go   the rulecounter.View of the kernel's drop counters (read at
//	              each scrape, and each deleted rule's final count at the
//	              sync that deletes it): nftguard_denied_{packets,bytes}_total
//	              by namespace, direction and kind, and the rate-limited count
//
// Tests: in a lab node (internal/netlab), real denied datagrams become one
// JSON record each with pods and policy, and the metrics match the
// kernel's counters; the counters' arithmetic (rules replaced, namespaces
// gone, reads out of step) and the address index are table-tested; a
// benchmark measures the work per record over caches of 10,000 pods.
package deniedflow
