// Package nodedns runs package dnsfwd's forwarder on a node for the agent:
// it chooses the node addresses the forwarder listens on (--dns-forwarder-address,
// else the Node's InternalIPs, else a global address of the node's own
// for a family the Node names none of), starts the forwarder and its
// heartbeat, tells every compile where it listens and which cluster DNS it
// trusts (--cluster-dns, else the ClusterIPs of kube-system/kube-dns),
// and hands it the table of every sync the kernel accepted. The first such
// table seeds the forwarder's element budget with what the domain sets
// already hold, so a restarted agent cannot hold the node's limit twice.
//
// It registers dnsfwd's metrics and nftguard_dns_addresses_held and
// nftguard_dns_names_held (read from the kernel at a scrape) on the
// Registerer it is given; a forwarder that cannot start or stops is
// counted through Node.OnError.
//
// # Where things are
//
//	nodedns.go  Config, Start, Forwarder (Input, Synced), the engine's
//	            committer of timed elements, the held-sets collector
package nodedns
