package clusterpolicy

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/internal/cnptest"
	"github.com/nftguard/nftguard/problem"
)

// TestCheckAllIsCompilesClassification: over random clusters, Compile
// reports exactly CheckAll's problems and warnings in order, enforces the
// policies CheckAll enforces, and fails closed the rules CheckAll marks
// (each marked rule has a problem or warning under its field, and each
// problem or warning under a rule's field marks it).
func TestCheckAllIsCompilesClassification(t *testing.T) {
	n := 600
	if testing.Short() {
		n = 100
	}
	var enforced, left, failed int
	for seed := int64(0); seed < int64(n); seed++ {
		in := randomCluster(rand.New(rand.NewSource(seed)))
		out := Compile(in)
		vs := CheckAll(in.Policies)
		var probs, warns []problem.Problem
		for i, v := range vs {
			probs, warns = append(probs, v.Problems...), append(warns, v.Warnings...)
			p := in.Policies[i]
			if !v.Enforced {
				left++
				if len(v.Problems) == 0 || v.Ingress != nil || v.Egress != nil {
					t.Errorf("seed %d: %s left out: %+v", seed, p.Name, v)
				}
				continue
			}
			enforced++
			if len(v.Ingress) != len(p.Spec.Ingress) || len(v.Egress) != len(p.Spec.Egress) {
				t.Fatalf("seed %d: %s: %d/%d rule checks for %d/%d rules", seed, p.Name, len(v.Ingress), len(v.Egress), len(p.Spec.Ingress), len(p.Spec.Egress))
			}
			for dir, rcs := range map[string][]RuleCheck{"ingress": v.Ingress, "egress": v.Egress} {
				for k, rc := range rcs {
					f := fmt.Sprintf("spec.%s[%d]", dir, k)
					reported := false
					for _, pr := range append(append([]problem.Problem(nil), v.Problems...), v.Warnings...) {
						if pr.Field == f || strings.HasPrefix(pr.Field, f+".") {
							reported = true
						}
					}
					if rc.FailClosed != reported || (rc.FailClosed && (rc.Cause == "" || !(rc.Field == f || strings.HasPrefix(rc.Field, f+".")))) {
						t.Errorf("seed %d: %s %s: %+v, reported %v", seed, p.Name, f, rc, reported)
					}
					if rc.FailClosed {
						failed++
					}
				}
			}
		}
		// Compile also reports local pods that share a name or an
		// address (package podchain), which are no policy's problem.
		var policyProblems []problem.Problem
		for _, pr := range out.Problems {
			if pr.Kind != "Pod" {
				policyProblems = append(policyProblems, pr)
			}
		}
		if diff := cmp.Diff(policyProblems, probs); diff != "" {
			t.Fatalf("seed %d: problems (-Compile +CheckAll):\n%s", seed, diff)
		}
		if diff := cmp.Diff(out.Warnings, warns); diff != "" {
			t.Fatalf("seed %d: warnings (-Compile +CheckAll):\n%s", seed, diff)
		}
		// Compile's chains carry the comments of enforced policies only.
		for _, ch := range out.Chains {
			for _, r := range ch.Rules {
				if name, ok := strings.CutPrefix(r.Comment, "cnp "); ok {
					name, _, _ = strings.Cut(name, " ")
					if !enforcedName(in.Policies, vs, name) {
						t.Errorf("seed %d: chain %s has a rule of %s, which CheckAll leaves out", seed, ch.Name, name)
					}
				}
			}
		}
	}
	t.Logf("%d policies enforced, %d left out, %d rules fail closed", enforced, left, failed)
	if enforced == 0 || left == 0 || failed == 0 {
		t.Errorf("random clusters too thin: %d enforced, %d left out, %d fail closed", enforced, left, failed)
	}
}

func enforcedName(pols []*v1beta1.ClusterNetworkPolicy, vs []Validity, name string) bool {
	for i, p := range pols {
		if p.Name == name && vs[i].Enforced {
			return true
		}
	}
	return false
}

// TestCheck pins the classification of hand-made policies: what leaves a
// policy out, what fails one rule closed, and what the first cause is.
func TestCheck(t *testing.T) {
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}
	z := func() []v1beta1.ClusterNetworkPolicyEgressPeer {
		return []v1beta1.ClusterNetworkPolicyEgressPeer{cnptest.PeerNamespaces(sel("ns", "z"))}
	}
	for _, tc := range []struct {
		name     string
		f        func(*v1beta1.ClusterNetworkPolicySpec)
		enforced bool
		field    string // of the first problem or warning
		fail     []bool // per egress rule (two rules)
		cause    string // of the failing rule, a substring
	}{
		{"valid", func(*v1beta1.ClusterNetworkPolicySpec) {}, true, "", []bool{false, false}, ""},
		{"bad-subject", func(s *v1beta1.ClusterNetworkPolicySpec) { s.Subject.Namespaces = bad }, false, "spec.subject.namespaces", nil, ""},
		{"tier", func(s *v1beta1.ClusterNetworkPolicySpec) { s.Tier = "" }, false, "spec.tier", nil, ""},
		{"bad-peer-selector", func(s *v1beta1.ClusterNetworkPolicySpec) {
			s.Egress[1].To = append(s.Egress[1].To, cnptest.PeerPods(sel(), bad))
		}, true, "spec.egress[1].to[1].pods.podSelector", []bool{false, true}, "Near"},
		{"empty-protocols", func(s *v1beta1.ClusterNetworkPolicySpec) {
			s.Egress[0].Protocols = []v1beta1.ClusterNetworkPolicyProtocol{}
		}, true, "spec.egress[0].protocols", []bool{true, false}, "0 protocols"},
		{"empty-protocol-entry", func(s *v1beta1.ClusterNetworkPolicySpec) {
			s.Egress[0].Protocols = []v1beta1.ClusterNetworkPolicyProtocol{cnptest.TCP(80), {}}
		}, true, "spec.egress[0].protocols[1]", []bool{true, false}, "exactly one of tcp"},
		{"domain-names", func(s *v1beta1.ClusterNetworkPolicySpec) {
			s.Egress[1].To = []v1beta1.ClusterNetworkPolicyEgressPeer{{DomainNames: []v1beta1.DomainName{"example.com"}}}
			s.Egress[1].Action = v1beta1.ClusterNetworkPolicyRuleActionDeny
		}, true, "spec.egress[1].to[0].domainNames", []bool{false, true}, "only in Accept rules"},
		{"domain-names-invalid", func(s *v1beta1.ClusterNetworkPolicySpec) {
			s.Egress[1].To = []v1beta1.ClusterNetworkPolicyEgressPeer{{DomainNames: []v1beta1.DomainName{"example.com", "*.-bad.example"}}}
		}, true, "spec.egress[1].to[0].domainNames[1]", []bool{false, true}, "label"},
		{"first-cause-counts", func(s *v1beta1.ClusterNetworkPolicySpec) {
			s.Egress[0].Action = "Allow"
			s.Egress[0].To = nil
		}, true, "spec.egress[0].action", []bool{true, false}, `"Allow"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := cnp("p", v1beta1.AdminTier, 0, func(s *v1beta1.ClusterNetworkPolicySpec) {
				s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{egress(deny, "", z()), egress(accept, "", z())}
				tc.f(s)
			})
			v := Check(p)
			if v.Enforced != tc.enforced {
				t.Fatalf("enforced %v, want %v: %+v", v.Enforced, tc.enforced, v)
			}
			all := append(append([]problem.Problem(nil), v.Problems...), v.Warnings...)
			if tc.field == "" && len(all) > 0 || tc.field != "" && (len(all) == 0 || all[0].Field != tc.field) {
				t.Errorf("problems and warnings %v, want the first for %q", all, tc.field)
			}
			var fail []bool
			for _, rc := range v.Egress {
				fail = append(fail, rc.FailClosed)
				if rc.FailClosed && (rc.Field != tc.field || !strings.Contains(rc.Cause, tc.cause)) {
					t.Errorf("rule check %+v, want field %s and a cause with %q", rc, tc.field, tc.cause)
				}
			}
			if !cmp.Equal(fail, tc.fail) {
				t.Errorf("fail closed %v, want %v", fail, tc.fail)
			}
		})
	}
}

// TestCheckAllDuplicateNames: the first enforced policy of a name counts;
// a left-out one does not take the name.
func TestCheckAllDuplicateNames(t *testing.T) {
	mk := func(tier v1beta1.Tier) *v1beta1.ClusterNetworkPolicy {
		return cnp("p", tier, 0, func(s *v1beta1.ClusterNetworkPolicySpec) {
			s.Egress = []v1beta1.ClusterNetworkPolicyEgressRule{egress(deny, "", []v1beta1.ClusterNetworkPolicyEgressPeer{cnptest.PeerNamespaces(sel())})}
		})
	}
	pols := []*v1beta1.ClusterNetworkPolicy{mk("Other"), mk(v1beta1.BaselineTier), mk(v1beta1.AdminTier)}
	vs := CheckAll(pols)
	var got []bool
	for _, v := range vs {
		got = append(got, v.Enforced)
	}
	if !cmp.Equal(got, []bool{false, true, false}) {
		t.Fatalf("enforced %v", got)
	}
	if n := len(vs[2].Problems); n != 1 || vs[2].Problems[0] != duplicateName(pols[2]) || vs[2].Egress != nil {
		t.Errorf("the duplicate: %+v", vs[2])
	}
	out := Compile(cluster(pols...))
	if diff := cmp.Diff(out.Problems, append(vs[0].Problems, vs[2].Problems...)); diff != "" {
		t.Errorf("Compile's problems (-Compile +CheckAll):\n%s", diff)
	}
	if len(out.Chains) == 0 || !strings.HasPrefix(out.Chains[0].Name, "cnp_be_") {
		t.Errorf("the Baseline policy is not the one enforced: %v", chainNames(out))
	}
}
