// Package agent is the node agent behind `nftguard run`. It has one
// concern: keeping the kernel's table equal to what the cluster says. It
// watches the Kubernetes API with shared informers, compiles the node's
// desired table with compose.Build and syncs it through the engine.
//
// Data flows one way: informer events only mark the state dirty; a single
// sync loop (leading-edge: a change after a quiet moment is synced at once,
// bursts are coalesced; see debouncer) reads the informer caches, compiles
// and calls engine.Sync. When the kernel refuses a batch, the loop asks
// package quarantine which new or changed objects it refuses (check-only
// batches, compiled here) and syncs the rest; they are held back until
// they change. ClusterNetworkPolicies are watched only while their CRD is
// served, which the agent follows without a restart (cnp.go): they are
// one of the caches the table is compiled from, so they stay here.
// ServiceCIDR objects, for egress, are watched only when the API serves
// them and the ClusterRole allows it, never as a condition
// (servicecidr.go). NetworkPolicies over their budget on this node are
// compiled in their fail-closed form (package budget, applied by
// compose.Builder with Config.Budget), named in a metric and an Event.
// Problems become Warning Events once per problem in the cluster, not once
// per node (package problemevents, given the problems of every compile).
// The engine's netlink monitor reports foreign changes to the table (drift),
// which the same loop repairs. Because the loop is the only writer, syncs
// never overlap and every metric describes one sync.
//
// Other nodes' pods come from every Pod (--peer-source pods) or, when
// nftguard's controller publishes them, from its compact PeerSlice records
// while only this node's Pods are watched in full (slices; auto chooses at
// start, peers.go). Either way the compilers get the same podset.Set, and
// so the same table; in slices mode the controller's Lease is read every
// --controller-lease-check, and while it is not renewed the records are
// stale: still enforced, said in a metric and in /readyz.
//
// Egress translates only to load-balancer addresses this node holds: Run
// reads the node's local addresses before the first sync and follows them
// over rtnetlink (egress.go), so kube-vip moving an address is synced like
// any change, in the same one-transaction sync.
//
// Each local pod's packets are bound to it by the interface they enter
// the node by (package podguard): Run reads the node's pod-facing
// interfaces (package podif) before the first sync, reads them again at
// every sync (a pod's addresses change in its own namespace, which the
// node's does not always hear of) and follows them over rtnetlink
// (podif.go), so a pod's new veth is synced like an object change. A read
// that fails keeps the interfaces last read. The local pods without an
// interface of their own are logged once each and counted
// (nftguard_pods_unattributed); a node none of whose pods has one (a
// network plugin nftguard cannot learn) gets one Warning Event.
//
// The DNS forwarder of domainNames rules is started by package
// dnsfwd/nodedns, which gives every compile its addresses and the cluster
// DNS and takes the table of every successful sync.
//
// With --log-denied, Run also starts package deniedflow (the denied-packet
// log, its attribution to pods and policies, and the drop counters as
// metrics) and hands it the input of every successful sync; it reads the
// informer caches and never writes the table.
//
// The table is never removed by the agent: on shutdown it stays in force, so
// a restart or upgrade never opens the node (`nftguard cleanup` removes it).
//
// # Where things are
//
//	run.go          Run: the start-up order, each component's start-up in a
//	                function of its own; the sync loop and its retry
//	                back-off, the drift monitor, the periodic resync
//	config.go       Config and its defaults
//	informers.go    sources: the informer caches and the compose.Input read
//	                from them, costing what the events touched
//	strip.go        the informers' transform: only the fields the compilers
//	                read, label sets shared; sameContent
//	cnp.go          the ClusterNetworkPolicy source, following its CRD through
//	                discovery
//	peers.go        the peer source (Pods or PeerSlices), chosen at start
//	                and by auto again until slices are published;
//	                the slices' records merged with this node's pods; the
//	                controller Lease's staleness
//	debounce.go     debouncer: when the loop syncs
//	syncer.go       syncer: one compile and one engine sync, the quarantine's
//	                search wired in, conntrack cleaning of stale egress
//	                translations
//	metrics.go      the agent's Prometheus registry and sync metrics
//	health.go       what /readyz says
//	server.go       the /healthz, /readyz and /metrics listener
//	localpods.go    the warning when no pod is scheduled to --node-name
//	egress.go       egressState: the node's addresses (package nodeaddr)
//	                given to every compile and followed over rtnetlink, a
//	                change synced like an object change; the held and
//	                pending egress metrics
//	podif.go        podIfState: the pod-facing interfaces (package podif)
//	                read for every compile and watched, the pods left
//	                unattributed (log, metrics, the Node's Event)
//	egresscount.go  egressCounters: the rulecounter.View of each egress
//	                Service's translated packets and bytes and of eg_hold's
//	                drops (package rulecounter reads the kernel's counters
//	                at scrape and folds in deleted rules' final counts)
//	guardcount.go   guardCounters: the packets the pod guards dropped, by
//	                namespace (a rulecounter.View of their drop rules)
//	testhook.go     test builds only (-tags nftguard_testhooks): a label
//	                that makes the kernel refuse an object, for the e2e tests
//	testhook_off.go the same hook, absent from every other build
package agent
