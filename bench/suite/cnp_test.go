package main

import (
	"strings"
	"testing"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/engine"
)

// TestCNPScenarioObjects: the generated CNPs at every profile's size are
// valid (a Problem would leave a policy out and measure less than the
// scenario claims), both changes change the benchmarked node's table, and
// the data-path table sends the lab's server and client through Admin and
// Baseline pod chains, so the measured flows really walk the CNP tiers.
func TestCNPScenarioObjects(t *testing.T) {
	for _, name := range []string{"smoke", "quick", "full"} {
		t.Run(name, func(t *testing.T) {
			prof, err := profiles(name)
			if err != nil {
				t.Fatal(err)
			}
			spec := prof.CNP
			if spec.Admin+spec.Baseline == 0 {
				t.Fatalf("profile %s has no CNP scenario", name)
			}
			c := newCluster(spec.Size)
			base := cnpCluster{cluster: c, CNPs: clusterNetworkPolicies(spec.Admin, spec.Baseline, len(c.Namespaces))}
			b0 := compose.Build(base.input())
			if len(b0.Problems) > 0 {
				t.Fatalf("base: %d problems, first %v", len(b0.Problems), b0.Problems[0])
			}
			text0 := render(t, b0)
			if !strings.Contains(text0, "cnp_ai_") || !strings.Contains(text0, "cnp_be_") {
				t.Fatalf("base table has no Admin ingress or Baseline egress pod chain")
			}
			names, afters, err := cnpChanges(base)
			if err != nil {
				t.Fatal(err)
			}
			for i, a := range afters {
				b := compose.Build(a.input())
				if len(b.Problems) > 0 {
					t.Fatalf("%s: problem %v", names[i], b.Problems[0])
				}
				if render(t, b) == text0 {
					t.Errorf("%s: table unchanged", names[i])
				}
			}

			dp := cnpDataPathCluster(spec)
			in := dp.input()
			in.NodeName = dpNode
			b := compose.Build(in)
			if len(b.Problems) > 0 {
				t.Fatalf("data path: problem %v", b.Problems[0])
			}
			text := render(t, b)
			for _, want := range []string{"cnp_ai_dp_server", "cnp_ae_dp_client", "cnp_bi_dp_server", "cnp_be_dp_client"} {
				if !strings.Contains(text, want) {
					t.Errorf("data-path table lacks chain %s", want)
				}
			}
		})
	}
}

func render(t *testing.T, b compose.Result) string {
	t.Helper()
	s, err := engine.Render(compose.Table(), b.Desired)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
