package engine

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCompiledChainsFollowTheirSetDeclarations checks the compile cache's
// rule: a chain compiled before is reused while the sets its rules name
// keep their declarations, whatever happens to other sets, and compiled
// again (here: refused) when one of them changes or goes.
func TestCompiledChainsFollowTheirSetDeclarations(t *testing.T) {
	c := newCompiler(unix.NFPROTO_INET)
	chain := Chain{Name: "c", Rules: []Rule{{Rule: "ip saddr @s accept"}, {Rule: "tcp dport 80 accept"}}}
	other := Chain{Name: "o", Rules: []Rule{{Rule: "ip daddr @t drop"}}}
	s := Set{Name: "s", Type: "ipv4_addr", Elements: []Element{{Key: "10.0.0.1"}}}
	tset := Set{Name: "t", Type: "ipv4_addr"}

	first, err := c.compile(&Desired{Chains: []Chain{chain, other}, Sets: []Set{s, tset}})
	if err != nil {
		t.Fatal(err)
	}
	// Another set added, t's declaration changed: c names neither.
	tset.Interval = true
	second, err := c.compile(&Desired{Chains: []Chain{chain, other}, Sets: []Set{s, tset, {Name: "u", Type: "ipv6_addr"}}})
	if err != nil {
		t.Fatal(err)
	}
	if second.chains["c"] != first.chains["c"] {
		t.Error("chain c was compiled again though the set it names did not change")
	}
	if second.chains["o"] == first.chains["o"] {
		t.Error("chain o was reused though the set it names changed its declaration")
	}
	// s changes its type: the unchanged rule text no longer fits.
	s6 := s
	s6.Type, s6.Elements = "ipv6_addr", nil
	if _, err := c.compile(&Desired{Chains: []Chain{chain, other}, Sets: []Set{s6, tset}}); err == nil || !strings.Contains(err.Error(), `chain "c"`) {
		t.Errorf("rule naming a set whose type changed: got error %v, want one naming chain c", err)
	}
	// s goes away.
	if _, err := c.compile(&Desired{Chains: []Chain{chain, other}, Sets: []Set{tset}}); err == nil || !strings.Contains(err.Error(), `chain "c"`) {
		t.Errorf("rule naming a removed set: got error %v, want one naming chain c", err)
	}
	// The failed compiles changed nothing: the second state is still cached.
	third, err := c.compile(&Desired{Chains: []Chain{chain, other}, Sets: []Set{s, tset, {Name: "u", Type: "ipv6_addr"}}})
	if err != nil {
		t.Fatal(err)
	}
	if third.chains["c"] != first.chains["c"] || third.chains["o"] != second.chains["o"] {
		t.Error("a failed compile changed what the compiler remembers")
	}
}

// TestRuleCommentVerbatim: a rule comment is stored as the caller wrote it
// (no escapes added); what nft strings cannot hold is refused clearly.
func TestRuleCommentVerbatim(t *testing.T) {
	d := &Desired{Chains: []Chain{{Name: "c", Rules: []Rule{{Rule: "accept", Comment: `a\b 'x'`}}}}}
	k, err := compile(0x1, d)
	if err != nil {
		t.Fatal(err)
	}
	if ud := string(k.chains["c"].rules[0].userdata); !strings.Contains(ud, `a\b 'x'`+"\x00") {
		t.Errorf("comment stored as %q", ud)
	}
	for _, c := range []string{`say "hi"`, "two\nlines", "nul\x00"} {
		d.Chains[0].Rules[0].Comment = c
		if _, err := compile(0x1, d); err == nil {
			t.Errorf("comment %q accepted", c)
		}
	}
}
