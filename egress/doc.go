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
// another pod is not a second map key (a warning names both). Names and
// comments derived from the Service go through internal/nftsafe.
//
// # Where things are
//
//	compile.go      Input, Output, Binding, Compile: the chains, maps and
//	                sets above, and which Service translates which pod
//	annotations.go  the annotations read and their values parsed: port
//	                lists merged, networks folded, problems for bad values
package egress
