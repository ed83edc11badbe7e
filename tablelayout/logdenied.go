package tablelayout

import (
	"fmt"
	"strconv"

	"github.com/nftguard/nftguard/engine"
)

// Logging of denied packets: with a LogDenied given (policy.Input.LogDenied,
// clusterpolicy.Input.LogDenied), the pods of namespaces annotated
// AnnotationLogDenied: "true" end their chains not in a plain drop but in
//
//	counter goto np_denied_ingress        (or np_denied_egress)
//
// and the two shared chains, which exist only while logging is on, are
//
//	chain np_denied_ingress {
//		limit rate R/second burst B packets counter log prefix "nftguard denied ingress" group G
//		counter drop
//	}
//
// Why shared chains rather than a log statement in each pod's chain: a
// limit statement keeps its own token bucket, so one in every pod chain
// would bound the records per pod, and a flood against a thousand pods
// would cost a thousand times the budget. Two shared chains make the bound
// per node and direction, R records a second (plus a burst of B), however
// many pods are flooded; what is over the limit is still counted, by the
// second rule's counter, so logged and suppressed packets are both known
// from the kernel's own counters.
//
// Why the prefix is enough: it names only the direction, never tenant text
// (no name of a namespace, pod or policy reaches it, so nothing a tenant
// writes can lengthen it past nft's 127 bytes or put a quote in it). The pod
// chain is the one the dispatch map sent the packet to, and that map is
// keyed by the pod's address: the destination address for ingress, the
// source address for egress. A reader recovers the chain from the record's
// addresses exactly as the kernel found it (see package flowlog).
//
// Counters. With LogDenied set, every isolated pod's final drop counts:
// pods of namespaces that do not opt in to records end in
//
//	counter drop
//
// so the agent can export packets and bytes denied per namespace and
// direction for every pod of the node (read with engine.Counters, see
// policy.DeniedChain), and records only for the namespaces that asked for them.
// Why the counters come with --log-denied and not always: a counter costs
// a per-CPU add on the drop path only (allowed packets never reach the
// final rule), so it is cheap, but principle 3 (docs/design.md) makes the
// table an operator reads and diffs part of the product: without the
// switch it stays byte for byte what it was before the feature, and the
// goldens under policy/testdata/ (all but log-denied.nft) pin that. The counters
// never make a sync rewrite a rule: the engine compares rules without
// their counter values.
//
// With LogDenied nil (the default) none of this exists.

// AnnotationLogDenied on a Namespace opts its pods in to logging of denied
// packets, when the node logs at all (a LogDenied is given). Only the exact
// value "true" opts in.
const AnnotationLogDenied = "nftguard.io/log-denied"

// The shared chains a logged pod's chain ends in, and the log prefixes that
// tell a reader which direction denied the packet.
const (
	ChainDeniedIngress = "np_denied_ingress"
	ChainDeniedEgress  = "np_denied_egress"
	LogPrefixIngress   = "nftguard denied ingress"
	LogPrefixEgress    = "nftguard denied egress"
	// The comments of the shared chains' two rules: the first counts
	// the packets logged, the second every packet (logged or over the
	// limit), so their difference is what the limit kept from the log.
	CommentDeniedLogged  = "logged"
	CommentDeniedDropped = "denied"
)

// Defaults of LogDenied, as DefaultLogDenied returns them. The group is
// not 0 or 100, the groups ulogd setups and kube-router use by default, so
// that nftguard's reader and theirs do not contend for one group (the
// kernel lets only one socket bind a group).
const (
	DefaultLogGroup = 1600
	DefaultLogRate  = 20
	DefaultLogBurst = 50
)

// LogDenied configures the logging of denied packets on a node.
type LogDenied struct {
	// Group is the nfnetlink_log group the records go to.
	Group uint16
	// Rate is how many denied packets a second are logged, per
	// direction, on the whole node; Burst how many more may be logged at
	// once after a quiet time. Packets over the limit are dropped all the
	// same, and counted.
	Rate  uint32
	Burst uint32
}

// DefaultLogDenied is the configuration `--log-denied` starts from.
func DefaultLogDenied() LogDenied {
	return LogDenied{Group: DefaultLogGroup, Rate: DefaultLogRate, Burst: DefaultLogBurst}
}

// Validate reports a configuration the kernel would refuse or that could
// never log: the rate must be at least 1 a second, the burst at least 1.
func (l LogDenied) Validate() error {
	if l.Rate == 0 {
		return fmt.Errorf("log rate must be at least 1 record a second")
	}
	if l.Burst == 0 {
		return fmt.Errorf("log burst must be at least 1 record")
	}
	return nil
}

// logRule is the first rule of a shared denied chain: rate-limited, it
// counts and logs the packets within the limit. A burst of 5 is written
// without "burst", because that is how nft lists it (5 is the kernel's
// default, and nft sends it when none is given): the rule must render as
// nft renders it.
func (l LogDenied) logRule(prefix string) string {
	s := "limit rate " + strconv.FormatUint(uint64(l.Rate), 10) + "/second"
	if l.Burst != 5 {
		s += " burst " + strconv.FormatUint(uint64(l.Burst), 10) + " packets"
	}
	return s + ` counter log prefix "` + prefix + `" group ` + strconv.FormatUint(uint64(l.Group), 10)
}

// DeniedChains are the two shared chains of a node that logs.
func DeniedChains(l LogDenied) []engine.Chain {
	return []engine.Chain{
		{
			Name:    ChainDeniedEgress,
			Comment: "NetworkPolicy: denied egress of logged pods, rate-limited log then drop",
			Rules: []engine.Rule{
				{Rule: l.logRule(LogPrefixEgress), Comment: CommentDeniedLogged},
				{Rule: "counter drop", Comment: CommentDeniedDropped},
			},
		},
		{
			Name:    ChainDeniedIngress,
			Comment: "NetworkPolicy: denied ingress of logged pods, rate-limited log then drop",
			Rules: []engine.Rule{
				{Rule: l.logRule(LogPrefixIngress), Comment: CommentDeniedLogged},
				{Rule: "counter drop", Comment: CommentDeniedDropped},
			},
		},
	}
}
