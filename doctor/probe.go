package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/nftguard/nftguard/engine"
)

// probeTable is the scratch table of the feature probe; it only ever exists
// inside the probe's private namespace.
var probeTable = engine.Table{Name: "nftguard_probe"}

// feature is one kernel capability nftguard needs, and the smallest table
// that uses it the way nftguard does (same engine, same bytecode).
type feature struct {
	name    string
	desired engine.Desired
}

func features() []feature {
	fwd := func(rules ...string) engine.Chain {
		c := engine.Chain{Name: "fwd", Type: "filter", Hook: "forward", Policy: "accept"}
		for _, r := range rules {
			c.Rules = append(c.Rules, engine.Rule{Rule: r})
		}
		return c
	}
	return []feature{
		{"nftables tables and base chains (nf_tables)", engine.Desired{Chains: []engine.Chain{fwd()}}},
		{"conntrack state matching (nft_ct)", engine.Desired{Chains: []engine.Chain{fwd("ct state established,related accept")}}},
		{"verdict maps", engine.Desired{
			Chains: []engine.Chain{fwd("ip saddr vmap @m"), {Name: "pod", Rules: []engine.Rule{{Rule: "drop"}}}},
			Sets:   []engine.Set{{Name: "m", Type: "ipv4_addr", Map: "verdict", Elements: []engine.Element{{Key: "10.0.0.1", Value: "jump pod"}}}},
		}},
		{"concatenated set keys", engine.Desired{
			Chains: []engine.Chain{fwd("ip daddr . meta l4proto . th dport @c accept")},
			Sets:   []engine.Set{{Name: "c", Type: "ipv4_addr . inet_proto . inet_service", Elements: []engine.Element{{Key: "10.0.0.1 . tcp . 80"}}}},
		}},
		{"interval sets", engine.Desired{
			Chains: []engine.Chain{fwd("ip saddr @i accept")},
			Sets:   []engine.Set{{Name: "i", Type: "ipv4_addr", Interval: true, Elements: []engine.Element{{Key: "10.0.0.0/8"}, {Key: "192.168.1.0-192.168.1.9"}}}},
		}},
		{"source NAT (nft_chain_nat, nft_nat)", engine.Desired{
			Chains: []engine.Chain{{Name: "post", Type: "nat", Hook: "postrouting", Priority: 90, Policy: "accept",
				Rules: []engine.Rule{{Rule: "snat ip to ip saddr map @s"}}}},
			Sets: []engine.Set{{Name: "s", Type: "ipv4_addr", Map: "ipv4_addr", Elements: []engine.Element{{Key: "10.0.0.1", Value: "192.0.2.1"}}}},
		}},
	}
}

// Probe checks the kernel features nftguard needs by programming a scratch
// table in a private network namespace, one feature at a time so a failure
// names the feature. It never touches any existing namespace.
func Probe(ctx context.Context) []Finding {
	var out []Finding
	var ok []string
	err := inPrivateNetNS(func(nsPath string) error {
		for _, f := range features() {
			if err := probeOne(ctx, nsPath, f); err != nil {
				out = append(out, Finding{Severity: Error, Check: "features",
					Message: fmt.Sprintf("the kernel refused %s: %v", f.name, err),
					Advice:  "load the module or use a kernel with it; nftguard cannot enforce without it"})
				continue
			}
			ok = append(ok, f.name)
		}
		return nil
	})
	if err != nil {
		return []Finding{{Severity: Warning, Check: "features", Message: "could not probe kernel features: " + err.Error(),
			Advice: "run doctor as root (the probe needs its own network namespace)"}}
	}
	if len(ok) > 0 {
		out = append([]Finding{{Severity: Info, Check: "features", Message: "supported: " + strings.Join(ok, ", ")}}, out...)
	}
	return out
}

func probeOne(ctx context.Context, nsPath string, f feature) error {
	eng, err := engine.New(probeTable, engine.WithNetNS(nsPath))
	if err != nil {
		return err
	}
	defer eng.Close()
	d := f.desired
	if _, err := eng.Sync(ctx, &d); err != nil {
		return err
	}
	return eng.Delete(ctx)
}
