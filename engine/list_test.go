package engine

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/nftguard/nftguard/internal/testns"
)

// TestList: List reads foreign tables of every family as nft shows them,
// reads our own table exactly as the engine's reader does (the same
// decoders), and changes nothing.
func TestList(t *testing.T) {
	ns := testns.New(t, "englist")
	ns.MustExec(t, "", "iptables-nft", "-A", "INPUT", "-m", "mark", "--mark", "0x8000/0x8000", "-j", "DROP")
	ns.MustExec(t, "", "iptables-nft", "-t", "mangle", "-A", "PREROUTING", "-j", "MARK", "--set-mark", "0x10")
	ns.MustExec(t, foreignNft, "nft", "-f", "-")
	e := newTestEngine(t, ns)
	d := &Desired{
		Chains: []Chain{
			{Name: "fwd", Type: "filter", Hook: "forward", Priority: 5, Policy: "drop", Rules: []Rule{
				{Rule: "ct state established,related accept"},
				{Rule: "ip saddr @peers jump pod"},
				{Rule: "ip daddr vmap { 10.0.0.9 : jump pod }"},
			}},
			{Name: "pod", Rules: []Rule{{Rule: "tcp dport 80 accept"}, {Rule: "drop"}}},
		},
		Sets: []Set{{Name: "peers", Type: "ipv4_addr", Elements: []Element{{Key: "10.0.0.1"}, {Key: "10.0.0.2"}}}},
	}
	if _, err := e.Sync(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	before := foreignSnapshot(t, ns) + ns.MustExec(t, "", "nft", "--debug=netlink", "list", "table", "inet", "nftguard")
	tables, err := List(ns.Path, ListOptions{ElementsOf: []string{"inet nftguard"}})
	if err != nil {
		t.Fatal(err)
	}
	if after := foreignSnapshot(t, ns) + ns.MustExec(t, "", "nft", "--debug=netlink", "list", "table", "inet", "nftguard"); after != before {
		t.Fatalf("List changed the namespace:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	byName := map[string]*ListedTable{}
	for _, tb := range tables {
		byName[tb.String()] = tb
	}
	chain := func(table, name string) *ListedChain {
		t.Helper()
		if tb := byName[table]; tb != nil {
			for _, c := range tb.Chains {
				if c.Name == name {
					return c
				}
			}
		}
		t.Fatalf("no chain %s in %s", name, table)
		return nil
	}
	for _, tt := range []struct {
		table, chain, desc string
		rules              int
	}{
		{"ip f4", "inp", "filter input -5 accept", 2},
		{"ip6 f6", "outp", "filter output 5 accept", 1},
		{"inet finet", "fw4", "filter forward 0 accept", 1},
		{"bridge fbr", "fw", "filter forward 0 accept", 1},
		{"netdev fnd", "c", "  0 ", 1},
		{"ip filter", "INPUT", "filter input 0 accept", 1},
		{"ip mangle", "PREROUTING", "filter prerouting -150 accept", 1},
		{"inet nftguard", "fwd", "filter forward 5 drop", 3},
		{"inet nftguard", "pod", "  0 ", 2},
	} {
		c := chain(tt.table, tt.chain)
		if got := fmt.Sprintf("%s %s %d %s", c.Type, c.Hook, c.Priority, c.Policy); got != tt.desc || len(c.Rules) != tt.rules {
			t.Errorf("%s chain %s: %q with %d rules, want %q with %d", tt.table, tt.chain, got, len(c.Rules), tt.desc, tt.rules)
		}
	}
	if r := chain("ip f4", "inp").Rules[0]; r.Text != "" || len(r.Exprs) == 0 {
		t.Errorf("an ip-family rule has text %q (the renderer is inet-only) or no expressions", r.Text)
	}
	if got := chain("inet nftguard", "pod").Rules[1].Text; got != "drop" {
		t.Errorf("rule text %q, want drop", got)
	}

	// Our table, listed and read by the engine, is one object.
	k := readBack(t, ns)
	own := byName["inet nftguard"]
	var names []string
	for _, c := range own.Chains {
		names = append(names, c.Name)
		kc := k.chains[c.Name]
		if kc == nil || kc.base != (c.Hook != "") || (kc.base && (hooks[c.Hook] != kc.hook || kc.prio != c.Priority)) || len(kc.rules) != len(c.Rules) {
			t.Errorf("chain %s: listed %+v, read %+v", c.Name, c, kc)
			continue
		}
		for i, r := range c.Rules {
			if r.Handle != kc.rules[i].handle {
				t.Errorf("chain %s rule %d: handle %d listed, %d read", c.Name, i, r.Handle, kc.rules[i].handle)
			}
		}
	}
	if !slices.Equal(names, k.chainOrder) {
		t.Errorf("chains %q listed, %q read", names, k.chainOrder)
	}
	for _, s := range own.Sets {
		ks := k.sets[s.Name]
		if ks == nil {
			continue // anonymous: the engine keeps those inside rules
		}
		if s.KeyType != ks.keyType || s.Flags != ks.flags || len(s.Elements) != len(ks.elems) {
			t.Errorf("set %s: listed %+v, read %+v", s.Name, s, ks)
		}
	}
	if len(k.sets) != 1 || len(k.sets["peers"].elems) != 2 {
		t.Errorf("the engine read sets %v", k.setOrder)
	}
}

func TestHookName(t *testing.T) {
	for _, tt := range []struct {
		family string
		num    uint32
		want   string
	}{
		{"inet", 0, "prerouting"}, {"ip", 2, "forward"}, {"ip6", 4, "postrouting"}, {"inet", 5, "ingress"},
		{"bridge", 1, "input"}, {"arp", 1, "output"}, {"arp", 2, "forward"}, {"netdev", 0, "ingress"},
		{"netdev", 1, "egress"}, {"inet", 9, "hook-9"}, {"arp", 3, "hook-3"},
	} {
		if got := HookName(tt.family, tt.num); got != tt.want {
			t.Errorf("HookName(%s, %d) = %q, want %q", tt.family, tt.num, got, tt.want)
		}
	}
	for name, num := range hooks {
		if got := HookName("inet", num); got != name {
			t.Errorf("HookName(inet, %d) = %q, the compiler's %q", num, got, name)
		}
	}
}
