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
// node's (a set of peers that several policies share, as the compiler
// shares it, counted once): then the largest give way (by their share of the node's limit,
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
// each holding every pod's address in a set of its own): with 200,000
// elements the cgroup peaked at 169.5–179.9 MiB (two runs, measured while
// rules still copied their peer sets), with 250,000 at 229.5 MiB, with
// 500,000 the agent was OOM-killed. The table's memory in the kernel is charged to the
// agent's cgroup and is outside GOMEMLIMIT, so it is what the node's
// limits bound; the Go side (BenchmarkCostFactors: compile, desired table
// and the engine's model) costs ≈ 94 bytes and ≤ 10 µs per rule and ≈ 65
// bytes and ≤ 2.3 µs per element, plus ≈ 500 bytes per rule of netlink
// batch for the length of a sync. So one object costs at most ≈ 0.1 s +
// 0.35 s of compile, all of them ≈ 0.5 s + 0.5 s. 150,000 elements per
// object let one policy select every pod of a 75,000-pod dual-stack
// cluster (150,000 single-stack); a selection shared by many policies is
// one set in the table and counts once in the node's total.
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
// Estimate mirrors the layout of packages policy and podchain and nothing
// else does. A policy that selects a local pod has a chain of its own per
// direction holding, per rule, one rule per peer kind and family (pods,
// ipBlocks; IPv4, IPv6) and protocol (its ports are one set per
// protocol), plus one per family for egress named ports; ingress named
// ports resolve in each selected pod's chain (one rule per peer kind and
// name there). Each selected pod's chain jumps to it; the rest of the pod
// chain (state, the pod to itself, the final drop) and its dispatch
// element are charged to every policy that selects the pod, which keeps
// the bound. Elements are counted as the kernel stores them: the port
// sets (one per protocol) and ipBlock sets (one per family) are interval
// sets, where an interval is two elements (its start and an end element
// after it; adjacent ports are not merged) and each set holds one more,
// the end sentinel at zero. So two per port entry and one per port set,
// two per ipBlock and except and two for the ipBlock sets, the addresses
// a rule's selector peers select (once per distinct peer list: the
// compiler shares that set between rules and policies), and egress named
// ports as addresses × names. TestFourPoliciesOfOddPortsInTheKernel reads
// the kernel's sets back: a policy of 45,000 lone ports (15,000 per
// protocol) adds 90,003–90,004 elements, estimated 90,005; four of them
// hold 360,013, so under the default limits two fail closed and the
// kernel holds 180,007 (when a port counted one element, the four were
// estimated at 180,008 and all passed). A policy that selects no local
// pod costs nothing: no chain holds its rules and no set is declared for
// it. TestEstimateBoundsTheCompile checks the bound against the compiler
// on random clusters, with the compiled interval sets counted in the
// kernel form the engine sends, which is what the kernel holds (worst
// case ≈ 8× the actual cost, 19× before the random policies had many
// lone ports: the pod chain charged to each policy, and port entries that
// merge into one range).
// When the layout changes, Estimate and its table test change with it.
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
