package engine

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftsyntax"
	"github.com/nftguard/nftguard/engine/nftwire"
)

// TestOwnRuleKey: the key of the engine's own rule, taken from the
// encoding of its expressions, is the key of the decode/re-encode path,
// and wireLen covers exactly the expressions when nothing was normalised.
func TestOwnRuleKey(t *testing.T) {
	decls := setDecls{}
	for _, s := range []struct{ name, key, data string }{
		{"allowed", "ipv4_addr", ""}, {"svc", "ipv4_addr . inet_proto . inet_service", "verdict"},
		{"egress", "ipv4_addr", "ipv4_addr"},
	} {
		d, err := nftsyntax.ParseSetDecl(s.name, s.key, s.data, false)
		if err != nil {
			t.Fatal(err)
		}
		decls[s.name] = d
	}
	rules := []string{
		"ip daddr 10.0.0.1 tcp dport 80 accept",
		"ip saddr @allowed accept",
		"ip daddr . meta l4proto . th dport vmap @svc",
		"ip saddr vmap { 10.0.0.1 : jump a, 10.0.0.2 : drop }",
		"tcp dport { 80, 443, 8080-8090 } counter accept",
		"counter packets 5 bytes 100 drop",
		`iifname "veth*" meta mark & 0x8000 == 0x8000 counter accept comment "egress"`,
		"ip saddr @allowed snat ip to ip saddr map @egress",
		"ct state established,related accept",
		"meta mark set 0x1 ip6 saddr fd00::/64 reject",
		`log prefix "x" group 1 limit rate 10/second drop`,
		"jump a",
	}
	for _, text := range rules {
		cr, err := nftsyntax.CompileRule(unix.NFPROTO_INET, text, decls)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		var anon []*kernelSet
		for _, as := range cr.AnonSets {
			anon = append(anon, anonSet(as))
		}
		resolve := func(_ string, id uint32) (string, bool) {
			if int(id) >= len(anon) {
				return "", false
			}
			return anon[id].contentKey(), true
		}
		key, wl, refs, err := ruleKey(unix.NFPROTO_INET, cr.Exprs, cr.UserData, resolve, nil, true)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		slow, _, slowRefs, err := ruleKey(unix.NFPROTO_INET, cr.Exprs, cr.UserData, resolve, nil, false)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		if key != slow {
			t.Errorf("%s: own key differs from the decoded one", text)
		}
		if len(refs) != len(slowRefs) {
			t.Errorf("%s: refs %q, decoded %q", text, refs, slowRefs)
		}
		wire := 0
		if !normalised(cr.Exprs) {
			wire = len(key) - len("\x00ud:") - len(cr.UserData)
		}
		if wl != wire {
			t.Errorf("%s: wireLen %d, want %d", text, wl, wire)
		}
	}
}

// normalised reports whether ruleKey must change an expression of a
// compiled rule (counter values, anonymous set references).
func normalised(exprs []nftwire.Expr) bool {
	for _, e := range exprs {
		switch x := e.(type) {
		case *nftwire.Counter:
			if x.Bytes != 0 || x.Packets != 0 {
				return true
			}
		case *nftwire.Lookup:
			if isAnonName(x.SetName) || x.SetID != 0 {
				return true
			}
		}
	}
	return false
}
