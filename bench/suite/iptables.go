package main

import (
	"fmt"
	"strings"

	"github.com/nftguard/nftguard/engine"
)

// iptablesEquivalent builds the kube-router-style iptables ruleset of the
// same size as the desired nft table: one chain per regular chain of d
// (one per isolated pod and direction), each with as many rules, and one
// FORWARD jump per chain, because iptables dispatches linearly where the
// nft table uses one verdict-map lookup. Set elements have no counterpart:
// kube-router keeps selector results in ipsets, outside the save|restore
// cycle, so the baseline is, if anything, smaller than nftguard's table.
func iptablesEquivalent(d *engine.Desired) (text string, chains, rules int) {
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	var regular []engine.Chain
	for _, c := range d.Chains {
		if c.Hook == "" {
			regular = append(regular, c)
		}
	}
	for i := range regular {
		fmt.Fprintf(&b, ":%s - [0:0]\n", iptChain(i))
	}
	b.WriteString("-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT\n")
	rules++
	for i := range regular {
		fmt.Fprintf(&b, "-A FORWARD -d %s/32 -j %s\n", podAddr(i), iptChain(i))
		rules++
	}
	for i, c := range regular {
		for j := range c.Rules {
			b.WriteString(iptRule(iptChain(i), i*1000+j))
			rules++
		}
	}
	b.WriteString("COMMIT\n")
	return b.String(), len(regular), rules
}

func iptChain(i int) string { return fmt.Sprintf("NG-POD-%05d", i) }

// iptRule is one allow rule as kube-router writes them: source, protocol,
// port, a comment naming the policy.
func iptRule(chain string, n int) string {
	return fmt.Sprintf("-A %s -s %s/32 -p tcp -m tcp --dport %d -m comment --comment \"rule %d of a policy\" -j ACCEPT\n",
		chain, podAddr(n%60000), 1024+n%60000, n)
}

// insertBefore puts lines before the first line of saved that starts with
// prefix.
func insertBefore(saved, prefix, lines string) (string, error) {
	i := strings.Index(saved, "\n"+prefix)
	if i < 0 {
		return "", fmt.Errorf("iptables-nft-save output lacks a line starting with %q", prefix)
	}
	return saved[:i+1] + lines + saved[i+1:], nil
}

// iptAddChain adds a pod: its chain, its rules and its FORWARD jump.
func iptAddChain(saved string) (string, error) {
	const ch = "NG-POD-NEW"
	s, err := insertBefore(saved, "-A ", ":"+ch+" - [0:0]\n")
	if err != nil {
		return "", err
	}
	rules := fmt.Sprintf("-A FORWARD -d 10.255.0.1/32 -j %s\n", ch) + iptRule(ch, 1) + iptRule(ch, 2) + iptRule(ch, 3)
	return insertBefore(s, "COMMIT", rules)
}

// iptRemoveChain removes the first pod's chain, its rules and its jump.
func iptRemoveChain(saved string) (string, error) {
	ch := iptChain(0)
	var b strings.Builder
	removed := 0
	for line := range strings.Lines(saved) {
		if strings.HasPrefix(line, ":"+ch+" ") || strings.HasPrefix(line, "-A "+ch+" ") || strings.HasSuffix(line, "-j "+ch+"\n") {
			removed++
			continue
		}
		b.WriteString(line)
	}
	if removed == 0 {
		return "", fmt.Errorf("iptables-nft-save output lacks chain %s", ch)
	}
	return b.String(), nil
}

// iptEditRule changes one rule's source address (a label change moves a
// pod in or out of a selector).
func iptEditRule(saved string) (string, error) {
	prefix := "-A " + iptChain(1) + " -s "
	i := strings.Index(saved, prefix)
	if i < 0 {
		return "", fmt.Errorf("iptables-nft-save output lacks %q", prefix)
	}
	j := i + len(prefix) + strings.IndexByte(saved[i+len(prefix):], ' ')
	return saved[:i+len(prefix)] + "10.255.0.2/32" + saved[j:], nil
}

// iptAppendRules adds a policy's rules to one pod's chain.
func iptAppendRules(saved string) (string, error) {
	ch := iptChain(2)
	return insertBefore(saved, "COMMIT", iptRule(ch, 7)+iptRule(ch, 8)+iptRule(ch, 9))
}
