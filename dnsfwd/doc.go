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
// # Fair shares
//
// A query is charged to the pod the Table names from its source address,
// never to the address alone, and the node's in-flight queries
// (Limits.InFlight, 256) are shared fairly: first between the namespaces
// that have queries in flight or waiting, then between the pods of each
// (admission.go). Namespaces first, because a tenant is a namespace: many
// subject pods of one namespace have one namespace's share together, and
// cannot starve another tenant's pod, as eight pods of 32 queries each
// could when the limit was per pod. A query over its pod's share is
// REFUSED at once; one within it takes a free slot, or waits while every
// slot is taken (at most Limits.QueueWait), and each slot that frees goes
// to the waiting query whose namespace, then pod, holds the fewest. So a
// namespace that filled the node while it was alone keeps what it holds
// but takes back nothing while another waits. Every namespace keeps at
// least Limits.NamespaceMin and every pod Limits.PodMin however many are
// busy, and no pod holds more than Limits.PodInFlight. The last 32 slots
// are only for namespaces that hold fewer than NamespaceMin: a namespace
// that asks little is answered at once even while others keep the rest
// taken and refill it in bursts.
//
// Sources of the node's pod ranges that no pod has (pods starting, held
// up to PendingWait for the table that names them) share one pool of
// Limits.StartingInFlight (16) queries and as many TCP connections,
// whatever their number: a pod that sends from many unused addresses of
// the range holds 16 slots at most, not 32 per address.
//
// A UDP query is also charged by the interface it came in on (IP_PKTINFO
// and IPV6_PKTINFO give the device a redirected query entered the node
// on). On a routed node every pod has an interface of its own, so a query
// that another pod forged with a pod's address is charged apart and never
// takes that pod's share. On a bridged node every query comes in on the
// bridge, and telling them apart is the data path's check of source
// addresses (no pod sends with an address that is not its own), which
// drops forged queries before they reach the forwarder. TCP needs no such
// check: a connection is set up only by the owner of its address. A pod
// has at most Limits.PodConns TCP connections, a namespace a quarter of
// Limits.Conns.
//
// # Elements in the kernel
//
// The forwarder counts the distinct elements its commits added that may
// still be in the kernel (a refresh counts once), per pod and for the
// node (budget.go). Each subject pod's first MinPodElements (256) are its
// own; beyond them the pods share Limits.NodeElements (65,536), each up
// to min(Limits.PodElements, 256 + NodeElements / subjects). An address
// beyond a limit is not added (its connections fail closed), the answer
// is relayed all the same, and the address is counted (node_limit or
// pod_limit). The sets outlive an agent: the agent seeds the count from
// the kernel at its first sync (Forwarder.Seed).
//
// # Where things are
//
//	forwarder.go  Config, Limits, Forwarder: the UDP and TCP listeners, the
//	              limits, the upstream exchange, commit before reply, the
//	              wait for a starting pod's table
//	admission.go  the fair shares of the in-flight queries (pure)
//	pktinfo.go    the interface a UDP query came in on
//	budget.go     the elements the pods' answers may hold in the kernel
//	heartbeat.go  Heartbeat: the element the redirect needs, refreshed
//	metrics.go    Metrics: the nftguard_dns_* collectors and their reasons
package dnsfwd
