package nftcheck

import (
	"strings"
	"testing"

	"github.com/nftguard/nftguard/engine"
)

func TestCheck(t *testing.T) {
	ok := &engine.Desired{
		Chains: []engine.Chain{{Name: "c", Comment: "fine", Rules: []engine.Rule{
			{Rule: "tcp dport { 1-100, 101-200 } ip saddr @s jump d"},
			{Rule: `limit rate 10/second counter log prefix "nftguard denied ingress" group 7`},
			// nft's quoted strings have no escapes: a backslash is a byte
			// like any other, as the engine's lexer reads it.
			{Rule: `log prefix "a\" group 1`},
		}}, {Name: "d"}},
		Sets: []engine.Set{
			{Name: "s", Type: "ipv4_addr", Interval: true, Elements: []engine.Element{{Key: "10.0.0.0/25"}, {Key: "10.0.0.128-10.0.1.0"}}},
			{Name: "m", Type: "ipv4_addr", Map: "verdict", Elements: []engine.Element{{Key: "10.0.0.1", Value: "jump d"}}},
		},
	}
	if errs := Check(ok); len(errs) > 0 {
		t.Fatalf("Check of a valid table: %v", errs)
	}
	for name, d := range map[string]*engine.Desired{
		"port overlap":    {Chains: []engine.Chain{{Name: "c", Rules: []engine.Rule{{Rule: "tcp dport { 1-100, 50-200 } accept"}}}}},
		"port repeat":     {Chains: []engine.Chain{{Name: "c", Rules: []engine.Rule{{Rule: "udp dport { 53, 53 } accept"}}}}},
		"prefix overlap":  {Sets: []engine.Set{{Name: "s", Type: "ipv4_addr", Interval: true, Elements: []engine.Element{{Key: "10.0.0.0/8"}, {Key: "10.1.0.0/16"}}}}},
		"map repeat":      {Sets: []engine.Set{{Name: "s", Type: "ipv4_addr", Map: "ipv4_addr", Elements: []engine.Element{{Key: "10.0.0.1", Value: "1.1.1.1"}, {Key: "10.0.0.1", Value: "1.1.1.2"}}}}},
		"missing chain":   {Sets: []engine.Set{{Name: "s", Type: "ipv4_addr", Map: "verdict", Elements: []engine.Element{{Key: "10.0.0.1", Value: "jump nope"}}}}},
		"missing set":     {Chains: []engine.Chain{{Name: "c", Rules: []engine.Rule{{Rule: "ip saddr @nope accept"}}}}},
		"quote comment":   {Chains: []engine.Chain{{Name: "c", Comment: `a"b`}}},
		"long comment":    {Chains: []engine.Chain{{Name: "c", Comment: strings.Repeat("a", 129)}}},
		"bad name":        {Chains: []engine.Chain{{Name: "c d"}}},
		"leading _":       {Chains: []engine.Chain{{Name: "_c"}}},
		"leading .":       {Sets: []engine.Set{{Name: ".s", Type: "ipv4_addr"}}},
		"keyword name":    {Chains: []engine.Chain{{Name: "accept"}}},
		"long name":       {Chains: []engine.Chain{{Name: strings.Repeat("c", 256)}}},
		"twice":           {Chains: []engine.Chain{{Name: "c"}, {Name: "c"}}},
		"long log prefix": {Chains: []engine.Chain{{Name: "c", Rules: []engine.Rule{{Rule: `log prefix "` + strings.Repeat("p", 128) + `" group 1`}}}}},
		"quote after log": {Chains: []engine.Chain{{Name: "c", Rules: []engine.Rule{{Rule: `log prefix "a" accept comment "b"`}}}}},
		"rule syntax":     {Chains: []engine.Chain{{Name: "c", Rules: []engine.Rule{{Rule: "accept; flush ruleset"}}}}},
		"family mismatch": {Sets: []engine.Set{{Name: "s", Type: "ipv6_addr", Interval: true, Elements: []engine.Element{{Key: "10.0.0.0/8"}}}}},
	} {
		if errs := Check(d); len(errs) == 0 {
			t.Errorf("%s: Check found nothing", name)
		}
	}
}
