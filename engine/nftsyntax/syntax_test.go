package nftsyntax

import (
	"bytes"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftwire"
)

const inet = Family(unix.NFPROTO_INET)

func TestRoundTrip(t *testing.T) {
	sets := testSets()
	for _, c := range allRuleCases() {
		got, err := CompileRule(inet, c.in, sets)
		if err != nil {
			t.Errorf("CompileRule(%q): %v", c.in, err)
			continue
		}
		text, err := RenderRule(inet, got, sets)
		if err != nil {
			t.Errorf("RenderRule(%q): %v", c.in, err)
			continue
		}
		if text != c.want {
			t.Errorf("round trip of %q:\n got  %s\n want %s", c.in, text, c.want)
		}
		// The canonical text compiles to the same expressions.
		again, err := CompileRule(inet, text, sets)
		if err != nil {
			t.Errorf("recompile %q: %v", text, err)
			continue
		}
		if !sameExprs(got, again) {
			t.Errorf("recompile of %q differs", text)
		}
	}
}

func marshalAll(c *Compiled) []byte {
	var b []byte
	for _, e := range c.Exprs {
		var err error
		if b, err = nftwire.AppendExpr(b, inet, e); err != nil {
			panic(err)
		}
	}
	return b
}

func sameExprs(a, b *Compiled) bool {
	if !bytes.Equal(marshalAll(a), marshalAll(b)) || !bytes.Equal(a.UserData, b.UserData) || len(a.AnonSets) != len(b.AnonSets) {
		return false
	}
	for i := range a.AnonSets {
		x, y := a.AnonSets[i], b.AnonSets[i]
		if x.Flags != y.Flags || !bytes.Equal(x.UserData, y.UserData) || len(x.Elements) != len(y.Elements) {
			return false
		}
		for j := range x.Elements {
			if !elemEqual(x.Elements[j], y.Elements[j]) {
				return false
			}
		}
	}
	return true
}

func elemEqual(a, b nftwire.Elem) bool {
	if !bytes.Equal(a.Key, b.Key) || !bytes.Equal(a.KeyEnd, b.KeyEnd) || a.IntervalEnd != b.IntervalEnd || !bytes.Equal(a.Data, b.Data) || !bytes.Equal(a.UserData, b.UserData) {
		return false
	}
	if (a.Verdict == nil) != (b.Verdict == nil) {
		return false
	}
	return a.Verdict == nil || *a.Verdict == *b.Verdict
}

func TestParseErrors(t *testing.T) {
	sets := testSets()
	for _, c := range []struct{ in, want string }{
		{"tcp dportt 80 accept", `col 5: unexpected "dportt": expected dport or sport`},
		{"ip saddr 10.0.0.300 accept", `col 10: unexpected "10.0.0.300": invalid ipv4_addr`},
		{"ip saddr", "col 9: unexpected end of rule: expected a value"},
		{"accept foo", `col 8: unexpected "foo": expected a match, statement or verdict`},
		{"tcp dport { 80, } accept", `col 17: unexpected "}": expected set element`},
		{"ip saddr @nope accept", "set @nope not found"},
		{"ip saddr @ps accept", "has key type inet_service"},
		{"ip saddr 10.0.0.1 ip6 daddr ::1", "conflicting protocols"},
		{"jump accept", `col 6: unexpected "accept": invalid chain name`},
		{"ct state bogus", `col 10: unexpected "bogus": expected invalid, established`},
		{"limit rate 10/fortnight", `col 12: unexpected "10/fortnight": expected unit`},
		{"reject with icmp type nope", `col 23: unexpected "nope": unknown icmp reject type`},
		{`accept comment "x" drop`, `col 20: unexpected "drop": comment must end the rule`},
		{"snat to 1.2.3.4", `col 6: unexpected "to": expected ip or ip6`},
		{"dnat ip to 1.2.3.4:53", "transport protocol mapping is only valid after transport protocol match"},
		{"th dport 53 dnat ip to 1.2.3.4:53", "transport protocol mapping is only valid after transport protocol match"},
		{"meta l4proto @alive dnat ip to 1.2.3.4:53", "transport protocol mapping is only valid after transport protocol match"},
		{"meta l4proto != tcp dnat ip to 1.2.3.4:53", "transport protocol mapping is only valid after transport protocol match"},
		{"meta l4proto tcp dnat ip to 1.2.3.4:http", `col 29: unexpected "1.2.3.4:http": port "http" is not a number`},
		{"meta l4proto tcp dnat ip to 1.2.3.4:65536", "is not a number from 0 to 65535"},
		{"meta l4proto tcp dnat ip to 1.2.3.4:", "empty port"},
		{"meta l4proto tcp dnat ip to 1.2.3.4:53-54", "is not a number"},
		{"dnat ip to 10.0.0.0/24", "invalid ipv4_addr"},
		{"meta l4proto tcp dnat ip6 to [fd00::1:53", "missing ]"},
		{"meta l4proto tcp dnat ip6 to [fd00::1]53", "expected :PORT after ]"},
		{"dnat ip to ip saddr map @am", "dnat to a map is not supported"},
		{"dnat to 1.2.3.4", `col 6: unexpected "to": expected ip or ip6`},
		{"meta mark 1-2", "ranges of mark are not supported"},
		{"ip saddr 10.0.0.1/8", "host bits set"},
		{`log prefix "unterminated`, "unterminated string"},
		{"log prefix\"\x00\"", `col 12: unexpected "\x00": control character in string`},
		{"log prefix \"a\x1bb\" accept", "control character in string"},
		{"accept\x00", "control character"},
		{"iifname \"eth\x7f\" accept", "control character in string"},
		{"meta l4proto tcp-udp accept", `invalid inet_proto "tcp-udp": nft reads it as one name, not a range of names`},
		{"meta l4proto { tcp-udp, 1 } accept", "not a range of names"},
		{"tcp dport http-443 accept", "not a range of names"},
		{"ip saddr { 10.0.0.0/8, 10.1.0.0/16 }", "overlaps"},
		{"icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert }", "icmpv6 type: only a single value"},
		{"ip6 hoplimit 1-255", "ip6 hoplimit: only a single value"},
		{"ip6 hoplimit 256", `invalid 8-bit integer "256"`},
		{"ip saddr 10.0.0.1 icmpv6 type nd-neighbor-solicit", "conflicting protocols"},
	} {
		_, err := CompileRule(inet, c.in, sets)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CompileRule(%q) error = %v, want it to contain %q", c.in, err, c.want)
		}
	}
}

func TestTypes(t *testing.T) {
	for _, c := range []struct {
		s          string
		len, magic uint32
	}{
		{"ipv4_addr", 4, 7}, {"ipv6_addr", 16, 8}, {"inet_proto", 1, 12}, {"inet_service", 2, 13},
		{"mark", 4, 19}, {"ifname", 16, 41}, {"verdict", 0, 1},
		{"ipv4_addr . inet_proto . inet_service", 12, 7<<12 | 12<<6 | 13},
		{"ipv4_addr . inet_service", 8, 0x1cd},
	} {
		typ, err := ParseType(c.s)
		if err != nil {
			t.Fatal(err)
		}
		if typ.String() != c.s || typ.Len() != c.len || typ.Magic() != c.magic {
			t.Errorf("%s: got %s len %d magic %#x", c.s, typ, typ.Len(), typ.Magic())
		}
	}
	if _, err := ParseType("ipv4_addr . bogus"); err == nil {
		t.Error("bogus type accepted")
	}
}

func TestElementsRoundTrip(t *testing.T) {
	for _, c := range elementCases {
		d, err := ParseSetDecl("x", c.key, c.data, c.interval)
		if err != nil {
			t.Fatal(err)
		}
		enc, err := EncodeElements(d, c.elems)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		// The kernel dumps in reverse order; decoding must not care.
		rev := make([]nftwire.Elem, len(enc))
		for i := range enc {
			rev[len(enc)-1-i] = enc[i]
		}
		dec, err := DecodeElements(d, rev)
		if err != nil {
			t.Errorf("%s: decode: %v", c.name, err)
			continue
		}
		want := c.want
		if want == nil {
			want = c.elems
		}
		if !sameElemTexts(dec, want, !c.interval || strings.Contains(c.key, ".")) {
			t.Errorf("%s: decoded %v, want %v", c.name, dec, want)
		}
	}
}

func sameElemTexts(a, b []ElementText, anyOrder bool) bool {
	if len(a) != len(b) {
		return false
	}
	if anyOrder {
		seen := map[ElementText]int{}
		for _, e := range a {
			seen[e]++
		}
		for _, e := range b {
			seen[e]--
		}
		for _, n := range seen {
			if n != 0 {
				return false
			}
		}
		return true
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestElementErrors(t *testing.T) {
	d, _ := ParseSetDecl("x", "ipv4_addr", "", true)
	for _, el := range [][]ElementText{
		{{Key: "10.0.0.0/8"}, {Key: "10.1.2.3"}},
		{{Key: "10.0.0.1"}, {Key: "10.0.0.1"}},
		{{Key: "10.0.0.1-10.0.0.9"}, {Key: "10.0.0.5-10.0.0.20"}},
	} {
		if _, err := EncodeElements(d, el); err == nil {
			t.Errorf("EncodeElements(%v) accepted an overlap", el)
		}
	}
	d2, _ := ParseSetDecl("x", "ipv4_addr", "", false)
	if _, err := EncodeElements(d2, []ElementText{{Key: "10.0.0.1"}, {Key: "10.0.0.1"}}); err == nil {
		t.Error("duplicate accepted")
	}
	if _, err := EncodeElements(d2, []ElementText{{Key: "10.0.0.0/8"}}); err == nil {
		t.Error("prefix in a non-interval set accepted")
	}
}

func FuzzCompileRule(f *testing.F) {
	for _, c := range allRuleCases() {
		f.Add(c.in)
	}
	// Regressions: a NUL in a string rendered differently from what it
	// compiled to; a name range was taken for a range.
	f.Add("log prefix\"\x00\"")
	f.Add("meta l4proto tcp-udp accept")
	sets := testSets()
	f.Fuzz(func(t *testing.T, text string) {
		c, err := CompileRule(inet, text, sets)
		if err != nil {
			return
		}
		out, err := RenderRule(inet, c, sets)
		if err != nil {
			t.Fatalf("accepted %q but cannot render: %v", text, err)
		}
		again, err := CompileRule(inet, out, sets)
		if err != nil {
			t.Fatalf("rendered %q from %q does not compile: %v", out, text, err)
		}
		if !sameExprs(c, again) {
			t.Fatalf("%q and its rendering %q compile differently", text, out)
		}
	})
}

func BenchmarkCompileRule(b *testing.B) {
	sets := testSets()
	rules := []string{
		"ct state established,related accept",
		"ct state invalid drop",
		"ip saddr 10.244.1.5 ip daddr . meta l4proto . th dport @c3 accept",
		"ip daddr . meta l4proto . th dport vmap @vm",
		"ip saddr vmap { 10.0.0.1 : jump a, 10.0.0.2 : drop }",
		`iifname "veth*" meta mark & 0x8000 == 0x8000 counter accept comment "pod egress"`,
		"tcp dport { 80, 443, 8080-8090 } accept",
		"ip saddr @s4 snat ip to 192.0.2.1",
		`log prefix "nftguard drop: " group 1 drop`,
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := CompileRule(inet, rules[i%len(rules)], sets); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBlockSizes: a rule's AST and its compiled form are allocated as one
// block each, kept within the size the allocator serves without a type
// header (see compiledBuf).
func TestBlockSizes(t *testing.T) {
	if n := unsafe.Sizeof(compiledBuf{}); n > 512 {
		t.Errorf("compiledBuf is %d bytes", n)
	}
	if n := unsafe.Sizeof(ruleAST{}); n > 512 {
		t.Errorf("ruleAST is %d bytes", n)
	}
}
