package fqdn

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// TestNormalizeHostile: names as a tenant's pod (or the server it asks)
// can write them, and the labels they are on the wire.
func TestNormalizeHostile(t *testing.T) {
	long63 := strings.Repeat("a", 63)
	for _, tc := range []struct {
		name, want string
	}{
		{"a.example", "a.example"},
		{"A.Example.", "a.example"},
		{"WWW.A.EXAMPLE", "www.a.example"},
		{".", ""},
		{"", ""},
		// A '.' inside a label is no boundary.
		{`evil\.example.test`, `evil\046example.test`},
		{`evil\046example.test.`, `evil\046example.test`},
		{`EVIL\.Example.TEST.`, `evil\046example.test`},
		// An escaped backslash is a byte of its label; the '.' after it
		// is a boundary.
		{`a\\.example.test`, `a\092.example.test`},
		{`a\\\.example.test`, `a\092\046example.test`},
		// \DDD is the byte, whatever digits spell it; letters fold.
		{`\101xample.test`, "example.test"},
		{`\069XAMPLE.test`, "example.test"},
		{`\Example.test`, "example.test"},
		{`a\032b.example.test`, `a\032b.example.test`},
		{`a\ b.example.test`, `a\032b.example.test`},
		{`x\000.a.example`, `x\000.a.example`},
		{`\255.a.example`, `\255.a.example`},
		{`*.a.example`, `\042.a.example`},
		{`_srv._tcp.a.example`, "_srv._tcp.a.example"},
		// Not names.
		{`\256.a.example`, invalidName},
		{`a\1.example`, invalidName},
		{`a\12`, invalidName},
		{`a\`, invalidName},
		{"a..example", invalidName},
		{".a.example", invalidName},
		{"a.example..", invalidName},
		{long63 + ".example", long63 + ".example"},
		{long63 + "a.example", invalidName},
		{strings.Repeat(`\046`, 64) + ".example", invalidName},
		// 255 bytes on the wire at most: 4 labels of 63 and the root
		// are 257.
		{strings.Repeat(long63+".", 3) + strings.Repeat("a", 61), strings.Repeat(long63+".", 3) + strings.Repeat("a", 61)},
		{strings.Repeat(long63+".", 3) + strings.Repeat("a", 62), invalidName},
	} {
		if got := Normalize(tc.name); got != tc.want {
			t.Errorf("Normalize(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestMatchesWireLabels: a wildcard matches whole wire labels before its
// domain, however the name is written.
func TestMatchesWireLabels(t *testing.T) {
	wild := Pattern{Domain: "example.test", Wildcard: true}
	plain := Pattern{Domain: "example.test"}
	for _, tc := range []struct {
		name        string
		wild, plain bool
	}{
		{`x.example.test`, true, false},
		{`X.EXAMPLE.TEST.`, true, false},
		{`example.test`, false, true},
		{`Example.Test.`, false, true},
		// One label "evil.example" in the zone "test".
		{`evil\.example.test`, false, false},
		{`evil\046example.test.`, false, false},
		{`a.evil\.example.test`, false, false},
		// A label that is a backslash, then example.test.
		{`\\.example.test`, true, false},
		{`x\\.example.test`, true, false},
		// A backslash and a dot in one label, then example.test.
		{`x\\\..example.test`, true, false},
		// Escapes that spell the domain are the domain.
		{`\101xample.test`, false, true},
		{`x.\069XAMPLE.t\101st`, true, false},
		// A dot inside the domain's labels is not the domain.
		{`x.example\.test`, false, false},
		{`example\.test`, false, false},
		{`.`, false, false},
		{``, false, false},
		{`x..example.test`, false, false},
		{strings.Repeat("a", 64) + ".example.test", false, false},
	} {
		n := Normalize(tc.name)
		if got := wild.Matches(n); got != tc.wild {
			t.Errorf("%v matches %q (%q): %v, want %v", wild, tc.name, n, got, tc.wild)
		}
		if got := plain.Matches(n); got != tc.plain {
			t.Errorf("%v matches %q (%q): %v, want %v", plain, tc.name, n, got, tc.plain)
		}
	}
}

// TestNormalizeAgreesWithTheWire: for names packed to the wire and read
// back by miekg/dns (as the forwarder reads them), the canonical forms of
// two names are equal exactly when their wire labels are, without case.
func TestNormalizeAgreesWithTheWire(t *testing.T) {
	names := []string{`evil\.example.test.`, `evil.example.test.`, `EVIL.example.test.`, `a\\.example.test.`,
		`a\\\..example.test.`, `\101xample.test.`, `example.test.`, `a\032b.example.test.`, `x\000.example.test.`, `\255\254.test.`}
	wire := func(n string) string {
		m := new(dns.Msg)
		m.SetQuestion(n, dns.TypeA)
		b, err := m.Pack()
		if err != nil {
			t.Fatalf("pack %q: %v", n, err)
		}
		var back dns.Msg
		if err := back.Unpack(b); err != nil {
			t.Fatal(err)
		}
		if got, again := Normalize(back.Question[0].Name), Normalize(n); got != again {
			t.Errorf("%q read back as %q: %q, %q", n, back.Question[0].Name, got, again)
		}
		w := []byte(string(b[12 : len(b)-4]))
		for i, c := range w {
			if 'A' <= c && c <= 'Z' {
				w[i] = c + 'a' - 'A'
			}
		}
		return string(w)
	}
	for _, a := range names {
		for _, b := range names {
			if sameWire, same := wire(a) == wire(b), Normalize(a) == Normalize(b); sameWire != same {
				t.Errorf("%q and %q: the same on the wire %v, normalized %v", a, b, sameWire, same)
			}
		}
	}
}
