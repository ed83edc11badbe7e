// Package compose builds nftguard's whole desired table for one node from
// the API objects, by running the pure compilers (clusterpolicy, policy and
// egress) and joining their chains and sets.
package compose

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/budget"
	"github.com/nftguard/nftguard/clusterpolicy"
	"github.com/nftguard/nftguard/egress"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/fqdn"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/podguard"
	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/policy"
	"github.com/nftguard/nftguard/problem"
	"github.com/nftguard/nftguard/tablelayout"
)

// Table is the one table nftguard owns.
func Table() engine.Table { return engine.Table{Name: "nftguard"} }

// Input is the cluster state the table is compiled from.
type Input struct {
	NodeName   string
	Namespaces []*corev1.Namespace
	Nodes      []*corev1.Node
	Pods       *podset.Set
	// NetworkPolicies grouped by namespace: a namespace whose Group is
	// the previous call's costs nothing (see npset).
	NetworkPolicies *npset.Set
	// ClusterNetworkPolicies are policy.networking.k8s.io objects of either
	// served version, converted to v1beta1 (the schemas are identical).
	ClusterNetworkPolicies []*cnpv1beta1.ClusterNetworkPolicy
	Services               []*corev1.Service
	ClusterCIDRs           []netip.Prefix
	ServiceCIDRs           []netip.Prefix
	// LogDenied turns on logging of denied packets for pods of
	// namespaces that opt in (see tablelayout.LogDenied); nil leaves it off.
	LogDenied *tablelayout.LogDenied
	// Budget, when set, bounds what NetworkPolicies may cost the node:
	// one over its budget, or over what the node's total leaves, is
	// compiled in its fail-closed form (see package budget).
	Budget *budget.Limits
	// Local are the addresses this node holds (egress.Input.Local); nil
	// means not checked.
	Local *egress.LocalAddrs
	// EgressGuardAlways is egress.Input.GuardAlways.
	EgressGuardAlways bool
	// DNS is where the agent's DNS forwarder listens and which cluster
	// DNS it trusts (clusterpolicy.Input.DNS); nil without a forwarder.
	DNS *clusterpolicy.DNS
	// PodInterfaces are the node's pod-facing interfaces, learned from
	// the kernel (package podif), when PodInterfacesKnown: each local
	// pod's gets a guard chain (package podguard). Without them (render,
	// which touches no kernel) the table has no guard chains.
	PodInterfaces      []podguard.Interface
	PodInterfacesKnown bool
}

// Result is the desired table and what was left out of it.
type Result struct {
	Desired *engine.Desired
	// EgressBindings maps each translated pod address to its egress
	// address, for clearing conntrack entries of older translations.
	EgressBindings map[netip.Addr]egress.Binding
	// EgressHeld and EgressPending are egress.Output's Held and Pending.
	EgressHeld    []egress.Held
	EgressPending []string
	// Problems name the objects left out and why; everything else is in
	// the table.
	Problems []problem.Problem
	// Warnings name valid objects that do not take full effect (yet).
	Warnings []problem.Problem
	// DNS is the DNS forwarder's table (clusterpolicy.Output.DNS).
	DNS *fqdn.Table
	// OverBudget are the NetworkPolicies compiled in their fail-closed
	// form because they are over budget on this node.
	OverBudget []budget.Over
	// Guarded maps each local pod (namespace/name) that has an interface
	// of its own to that interface's name; Unattributed are the local
	// pods (namespace/name, sorted) without one, whose packets are keyed
	// by address only (see package podguard). Both are empty when
	// Input.PodInterfacesKnown is false.
	Guarded      map[string]string
	Unattributed []string
}

// Build compiles the desired table.
func Build(in Input) Result {
	return new(Builder).Build(in)
}

// Builder builds the desired table for successive states of one node's
// cluster, re-deriving only what depends on objects that changed (see
// policy.Compiler): what an event did not touch comes back as the same
// chains and sets, which the engine then skips without comparing them. The
// caller must pass changed API objects as new objects and never modify one
// it passed, as informer caches guarantee; the same holds for the object
// lists (an unchanged list may be passed again, a changed one must be a
// new list) and for pods (podset). The zero value is ready to use;
// a Builder is not safe for concurrent use.
type Builder struct {
	guard   podguard.Compiler
	policy  policy.Compiler
	cluster clusterpolicy.Compiler
	budget  budget.Gate
	// budgeted is set once a Build applied budgets.
	budgeted bool
}

// Budget is the gate that applied the last Build's budgets, nil before
// one did: its Total and Estimate say what the policies cost.
func (b *Builder) Budget() *budget.Gate {
	if !b.budgeted {
		return nil
	}
	return &b.budget
}

// Build compiles the desired table; the result equals the package's Build.
func (b *Builder) Build(in Input) Result {
	// The guards first: they say which link-local addresses are whose.
	var guard podguard.Output
	if in.PodInterfacesKnown {
		guard = b.guard.Compile(podguard.Input{
			NodeName:   in.NodeName,
			Pods:       in.Pods,
			Interfaces: in.PodInterfaces,
			PodCIDRs:   nodePodCIDRs(in.Nodes, in.NodeName),
			Log:        guardLog(in.LogDenied),
		})
	}
	// The ClusterNetworkPolicy tiers next: their dispatch rules go into
	// the NetworkPolicy fixed chains.
	cnp := b.cluster.Compile(clusterpolicy.Input{
		NodeName:   in.NodeName,
		Namespaces: in.Namespaces,
		Pods:       in.Pods,
		Nodes:      in.Nodes,
		Policies:   in.ClusterNetworkPolicies,
		DNS:        in.DNS,
		LogDenied:  in.LogDenied,
		LinkLocal:  guard.LinkLocal,
	})
	policies := in.NetworkPolicies
	var over []budget.Over
	if in.Budget != nil {
		b.budgeted = true
		policies, over = b.budget.Apply(budget.Input{NodeName: in.NodeName, Namespaces: in.Namespaces,
			Pods: in.Pods, Policies: in.NetworkPolicies, Limits: *in.Budget})
	}
	pol := b.policy.Compile(policy.Input{
		NodeName:   in.NodeName,
		Namespaces: in.Namespaces,
		Pods:       in.Pods,
		Policies:   policies,
		LogDenied:  in.LogDenied,
		Tiers:      cnp.Tiers,
		LinkLocal:  guard.LinkLocal,
	})
	eg := egress.Compile(egress.Input{
		NodeName:     in.NodeName,
		Pods:         in.Pods,
		Services:     in.Services,
		Nodes:        in.Nodes,
		ClusterCIDRs: in.ClusterCIDRs,
		ServiceCIDRs: in.ServiceCIDRs,
		Local:        in.Local,
		GuardAlways:  in.EgressGuardAlways,
	})
	r := Result{
		Desired: &engine.Desired{
			Chains: slices.Concat(pol.Chains, cnp.Chains, eg.Chains, guard.Chains),
			Sets:   slices.Concat(pol.Sets, cnp.Sets, eg.Sets, guard.Sets),
		},
		EgressBindings: eg.Bindings,
		EgressHeld:     eg.Held,
		EgressPending:  eg.Pending,
		Problems:       slices.Concat(pol.Problems, podsOnce(pol.Problems, cnp.Problems), eg.Problems, guard.Problems),
		Guarded:        guard.Guarded,
		Unattributed:   guard.Unattributed,
		Warnings:       eg.Warnings,
		OverBudget:     over,
		DNS:            cnp.DNS,
	}
	if len(cnp.Warnings) > 0 {
		r.Warnings = slices.Concat(cnp.Warnings, eg.Warnings)
	}
	return r
}

// podsOnce returns the cluster tiers' problems without those about a
// local pod that the NetworkPolicy compiler reported already: both report
// a pod whose name or address another local pod came first with (package
// podchain), and the pod is one problem, not one per tier. Problems about
// policies are all kept, also two equal ones (two objects of one name).
func podsOnce(pol, cnp []problem.Problem) []problem.Problem {
	seen := map[problem.Problem]bool{}
	for _, p := range pol {
		if p.Kind == "Pod" {
			seen[p] = true
		}
	}
	if len(seen) == 0 {
		return cnp
	}
	out := make([]problem.Problem, 0, len(cnp))
	for _, p := range cnp {
		if !seen[p] {
			out = append(out, p)
		}
	}
	return out
}

// nodePodCIDRs are the pod ranges of the node named (spec.podCIDRs, or
// spec.podCIDR when an older writer set only that), parsed; nil when the
// node is unknown or has none.
func nodePodCIDRs(nodes []*corev1.Node, name string) []netip.Prefix {
	for _, n := range nodes {
		if n.Name != name {
			continue
		}
		cidrs := n.Spec.PodCIDRs
		if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
			cidrs = []string{n.Spec.PodCIDR}
		}
		var out []netip.Prefix
		for _, c := range cidrs {
			if p, err := netip.ParsePrefix(c); err == nil {
				out = append(out, p.Masked())
			}
		}
		return out
	}
	return nil
}

// guardLog logs forged packets where the node logs denied ones.
func guardLog(l *tablelayout.LogDenied) *podguard.Log {
	if l == nil {
		return nil
	}
	return &podguard.Log{Group: l.Group, Rate: l.Rate, Burst: l.Burst}
}
