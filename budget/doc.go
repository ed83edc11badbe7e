// Package budget bounds what NetworkPolicies may cost a node, and fails
// closed the ones that would cost more: a tenant's object must not cost a
// node more than a stated multiple of its own size, nor freeze or open it.
//
// Before the compilers run, Gate estimates each NetworkPolicy that selects
// pods of this node (Estimate: an upper bound of the rules and set
// elements it adds, from its own sizes and how many addresses its
// selectors select) and replaces each one over budget by its fail-closed
// form (FailClosed: the same podSelector and policyTypes, no rules), so
// the pods it selects stay isolated and nothing it allows is installed.
// A policy is over budget when its estimate exceeds the per-object limit,
// or when the policies that fit their own limit together exceed the
// node's: then the largest give way (by their share of the node's limit,
// ties by name) until the rest fit, so that one large object never pushes
// out many small ones. Everything else is compiled as written, at the cost
// it had without the over-budget object.
//
// # The limits (Default)
//
// Per object 10,000 rules and 150,000 set elements; per node 50,000 rules
// and 200,000 elements. The node's limits come from the agent under the
// DaemonSet's limits (TestAgentMemoryBudget in e2e: GOMEMLIMIT=160MiB in a
// 256 MiB memory cgroup, 2,006 pods, a 5,000-port policy and 300 policies
// each copying every pod's address): with 200,000 elements the cgroup
// peaked at 169.5–179.9 MiB (two runs), with 250,000 at 229.5 MiB, with 500,000 the agent
// was OOM-killed. The table's memory in the kernel is charged to the
// agent's cgroup and is outside GOMEMLIMIT, so it is what the node's
// limits bound; the Go side (BenchmarkCostFactors: compile, desired table
// and the engine's model) costs ≈ 94 bytes and ≤ 10 µs per rule and ≈ 65
// bytes and ≤ 2.3 µs per element, plus ≈ 500 bytes per rule of netlink
// batch for the length of a sync. So one object costs at most ≈ 0.1 s +
// 0.35 s of compile, all of them ≈ 0.5 s + 0.5 s. 150,000 elements per
// object let one policy select every pod of a 75,000-pod dual-stack
// cluster (150,000 single-stack) while rules copy their peer sets.
//
// # What the gate costs
//
// An event costs the namespaces it touched: groups are compared by
// identity and position, a pod change re-estimates only the policies that
// select local pods and counted pods of a changed namespace, and only
// namespaces with a policy over budget are rebuilt. BenchmarkEnvelopeEvent
// (agent, with the budgets as the agent runs them) measured one event at
// 150,000 pods and 10,000 policies at 0.14–0.60 ms (0.21–0.48 ms before
// the budgets, another day's load); TestEnvelopeMemory 755 live bytes per
// pod at 10,000 pods (742 without).
//
// # The cost model
//
// Estimate mirrors package policy's layout and nothing else does: each
// local pod the policy selects gets a chain per direction holding, per
// rule, one rule per peer kind and family (pods, ipBlocks; IPv4, IPv6)
// and port entry, plus one per family for egress named ports; each rule
// holds its own sets (the selected addresses; ipBlocks cut by their
// excepts; egress named ports as address . protocol . port, peers ×
// names). A policy that selects no local pod costs nothing: no chain holds
// its rules and no set is declared for it. TestEstimateBoundsTheCompile
// checks the bound against the compiler on random clusters (worst case
// ≈ 9× the actual cost, from the per-pod chain overhead each policy is
// charged with). When the layout changes (ports as sets, selections
// shared), Estimate and its table test change with it.
//
// ClusterNetworkPolicies are written by cluster administrators and are
// not budgeted; Services' egress annotations are bounded where they are
// read.
//
// # Where things are
//
//	model.go   Cost, Shape, Estimate: the cost model
//	limits.go  Limits and Default
//	gate.go    Gate (incremental estimates, the choice, the substitution),
//	           FailClosed, and Problem (how an over-budget policy is named)
package budget
