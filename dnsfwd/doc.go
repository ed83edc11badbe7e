// Package dnsfwd is the DNS forwarder inside the agent that makes
// ClusterNetworkPolicy domainNames peers work without a race: the table
// redirects the subject pods' queries to the cluster DNS (UDP and TCP) to
// it, it relays each query to the real cluster DNS, and before the pod
// can read the answer it adds "POD . ADDR" elements with the answer's TTL
// to the rules' timeout sets in one netlink batch. So the pod's first
// connection to an address it just resolved finds the element already in
// the kernel.
//
// The forwarder trusts nothing a pod sends: a source that is not a
// subject pod is refused (it is never an open resolver), queries are
// bounded per pod and in total, TCP connections and messages are bounded
// in number, size and time, and only the replies of its own upstream
// exchanges (a fresh socket and a fresh random id per query, on a socket
// connected to the Table's server) are ever parsed into elements. DNS must
// not break because of it: an upstream failure is a SERVFAIL, a failed
// commit still answers the pod (whose connection the policy then refuses:
// fail closed), and a heartbeat keeps the table's redirect alive only
// while the forwarder serves, so a dead agent sends the pods' DNS straight
// to the cluster DNS again within HeartbeatTTL.
//
// The pure part, which addresses an answer adds for which pod and rule,
// is package fqdn.
//
// # Where things are
//
//	forwarder.go  Config, Limits, Forwarder: the UDP and TCP listeners, the
//	              limits, the upstream exchange, commit before reply, the
//	              wait for a starting pod's table
//	budget.go     the elements one pod's answers may hold in the kernel
//	heartbeat.go  Heartbeat: the element the redirect needs, refreshed
//	metrics.go    Metrics: the nftguard_dns_* collectors and their reasons
package dnsfwd
