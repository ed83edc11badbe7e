// Package flowlog reads the packets nftguard's table denies and logs: it
// subscribes to the nfnetlink_log group over netlink, with no ulogd and no
// `nft monitor`, decodes each record, and names the pods and the policies
// that decided.
//
// The kernel side is package tablelayout's (see tablelayout/logdenied.go):
// with logging on, the chains of pods in namespaces annotated
// nftguard.io/log-denied: "true" end in one of two shared chains that log
// with `limit rate R/second burst B packets counter log prefix "nftguard
// denied ingress|egress" group G` and then drop. So records are bounded per
// node and direction, whatever is flooded, and the kernel counts both the
// logged packets and all denied ones.
//
// A record's prefix gives the direction (or says the source was forged:
// the pod is then the one whose interface the packet came in by, which an
// InterfaceResolver knows); the pod whose chain denied the
// packet is the one the direction's dispatch map is keyed by, the
// destination address for ingress and the source for egress, and a
// Resolver (the agent's informer caches through package deniedflow, or
// Objects over manifests) turns that address into namespace/name and the
// policies isolating the pod. Which policies isolate a pod is defined once,
// by policy.IsolatingPolicies (the compiler's semantics, not this I/O
// package's), and every Resolver answers with it through IsolatingPolicies.
//
//	record.go   Record and the decoding of NFULNL_MSG_PACKET messages and
//	            their IPv4/IPv6 payloads (ports, ICMP type, fragments,
//	            IPv6 extension headers)
//	reader.go   Open (bind the group inside a network namespace, copy
//	            mode packet, a queue threshold of 1) and Run
//	resolve.go  Resolver, Objects, IsolatingPolicies and Resolve: pods, the
//	            isolating policies and the decision
//	cluster.go  ClusterDenier, ClusterDeny: the ClusterNetworkPolicy rule
//	            that denied a record, by evaluating its flow with explain
//	journal.go  Journal: the bounded ring of recent records and its counts
//
// One reader per group. nfnetlink_log hands a group's records to the one
// socket that bound it, and refuses a second bind (Open returns
// ErrGroupBusy), so two readers never split records between them unseen:
// the second one fails loudly. The agent reads the group; `nftguard flows`
// reads it where no agent runs (a lab, a node without the DaemonSet), and
// says so when the agent has it.
//
// Open sends no PF_BIND: that command makes nfnetlink_log the logger of
// every plain `log` statement of the namespace, which is not nftguard's to
// change; `log group N` reaches nfnetlink_log without it.
//
// Tests run against the real kernel in a lab node (internal/netlab): real
// UDP, TCP and ICMP packets over IPv4 and IPv6 are denied and read back
// with their addresses, ports, direction, pod and policy, and a flood of
// 100,000 datagrams gives no more records than the limit allows while the
// kernel's counters account for every packet. A matrix of one packet per
// flow (TCP SYN, UDP datagram, SCTP INIT; IPv4 and IPv6) gives exactly one
// record per denied flow and none per allowed one, and the pod chains'
// drop counters (engine.Counters) grow by exactly the denied packets.
package flowlog
