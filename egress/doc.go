// Package egress compiles LoadBalancer Services annotated for egress into the
// source-NAT part of nftguard's desired table: pods selected by such a
// Service, on this node, leave the cluster with the Service's load-balancer
// address as their source.
//
// It is pure: Services, Pods and Nodes go in, chains and sets come out, plus
// problems naming the Service, the annotation and the value that could not be
// used. Nothing here talks to the kernel or to an API server.
//
// # Table layout
//
//	chain eg_hold          type filter hook postrouting priority 80 (before
//	                       any NAT): drops traffic that leaves the cluster
//	                       from held pod addresses (@eg_hold4/6), and, while
//	                       a claimed pod has no address yet, from this
//	                       node's pod range (@eg_guard4/6) unless a pod
//	                       has the address (@eg_known4/6); then jumps to
//	                       the counting chain of a translated pod's Service
//	                       (@eg_count4/6)
//	chain eg_cnt_NS_NAME   counts the Service's translated traffic, every
//	                       packet (the NAT chain sees only a flow's first):
//	                       internal destinations return, then a counter, or
//	                       for a restricted Service its own chain's matches,
//	                       each with a counter (comment: NS/NAME)
//	chain eg_postrouting   type nat hook postrouting priority 90 (before
//	                       ordinary source NAT at 100, so the first NAT
//	                       binding is ours):
//	                         ip daddr @eg_internal4 return  (cluster, service
//	                         and node addresses are never translated)
//	                         ip saddr vmap @eg_dispatch4    (restricted Services)
//	                         snat ip to ip saddr map @eg_snat4
//	                       and the same for IPv6
//	map eg_snat4           pod address → load-balancer address, for Services
//	                       without port or network restrictions: O(1)
//	map eg_dispatch4       pod address → jump eg_svc_NS_NAME, for Services
//	                       with restrictions, whose chain checks them and
//	                       translates
//
// # Claimed pods: translated, or held
//
// A Service annotated for egress (type LoadBalancer, with a selector)
// claims its selected pods' traffic that leaves the cluster, for IPv4 and,
// with egress-ipv6, IPv6 (the families of spec.ipFamilies; both when it is
// unset). No packet of a claimed family leaves with another source: where
// the Service cannot be translated to, its pods' addresses are held
// (eg_hold4/6, Output.Held): their traffic that leaves the cluster is
// dropped. That is so when the Service has no address of the family yet,
// when an annotation or status.loadBalancer.ingress[].ip is invalid (read
// as strictly as the API server validates it: no leading zeros, no
// IPv4-mapped IPv6 address, no zone), and when Input.Local is set and does
// not hold the address: kube-vip announces an address from one node, and
// replies to traffic translated to it on another node would never come
// back. A Service annotated egress-node-masquerade "true" lets its pods
// leave with the node's address in those cases instead. Held traffic is
// dropped in a filter chain, so every packet is judged, established flows
// included, not only a connection's first as in a NAT chain.
//
// A pod object exists before its address: a claimed pod of this node with
// no address yet is pending (Output.Pending), and while one is, traffic
// that leaves the cluster from this node's pod ranges (its Node's
// spec.podCIDRs; the cluster's when it has none) from an address no
// running pod has is dropped, so the pod's first packets cannot leave
// with the node's address before its translation is programmed: they wait
// for it. That is the guard's cost to other pods: while it is on, any new
// pod of this node, claimed or not, waits for its address to reach the
// agent before its traffic can leave the cluster; traffic inside the
// cluster is never held. While it is off its range sets are empty and cost
// every packet one lookup in an empty set. The known addresses are kept
// whether it is on or not, so that turning it on or off changes a few
// ranges, never the whole set: a tenant's pod that never gets an address
// costs the node that, not a rewrite of every pod address. Without a range
// of its own on the Node the guard covers the cluster's pod ranges and
// knows every pod's address (traffic of other nodes' pods routed through
// this one must not be held). With Input.GuardAlways the guard is on
// whenever a Service claims pods (without node masquerade), pending pod or
// not: a pod that sends before the agent has learned of its object is
// covered too, at the cost of every new pod of the node waiting for its
// address to be known.
//
// # What is inside the cluster
//
// The pod ranges are the configured ones (Input.ClusterCIDRs, the flag
// --cluster-cidr) and every Node's spec.podCIDRs, merged (PodRanges): a flag
// that lacks a family, or a range added to the cluster later, is completed
// by the Nodes the node IPAM gave ranges to. A family with no known pod
// range is not translated at all, since its pod-to-pod traffic could not be
// told from traffic that leaves the cluster: a Service that would translate
// it is named (a warning when its other family is still translated, a
// problem when nothing is left). A selected pod whose own address lies
// outside every known range of its family proves those ranges incomplete:
// that address is not translated (a warning names the pod). Service ranges
// (Input.ServiceCIDRs) and node addresses are never translated either.
//
// Destination and source port lists are matched per protocol, so each
// protocol is matched on its own: no rule ever requires two protocols at
// once.
//
// # Hostile and broken input
//
// No Service can make the kernel refuse the batch that carries everyone
// else's table. Repeated, overlapping and adjacent port ranges of one
// protocol are merged (tcp:1-100,tcp:50-200 is tcp:1-200) and repeated or
// nested networks dropped, since the union is exactly what was asked for;
// a list longer than 512 port ranges or 1024 networks after merging skips
// the Service with a problem naming the annotation. A load-balancer address
// that does not parse skips the Service with a problem naming
// status.loadBalancer.ingress[i].ip. A pod address already translated for
// another pod is not a second map key (a warning names both), nor a second
// held address. Names and
// comments derived from the Service go through internal/nftsafe.
//
// # Where things are
//
//	compile.go      Input, Output, Binding, Held, LocalAddrs, Compile: the
//	                chains, maps and sets above, which Service translates
//	                or holds which pod, and the pod-start guard
//	annotations.go  the annotations read and their values parsed: port
//	                lists merged, networks folded, problems for bad values;
//	                ParseLoadBalancerIP
//	source.go       SourceOf: what source address a pod's traffic to one
//	                destination leaves with, and why, read from Compile's
//	                output (`nftguard explain-egress`)
package egress
