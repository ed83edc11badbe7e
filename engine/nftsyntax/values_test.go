package nftsyntax

import (
	"flag"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nftguard/nftguard/internal/golden"
)

// testdata/values.golden holds what parseValue and parseKeyPart make of
// every text of valueTexts for every datatype: the bytes, or the error
// word for word. A change of behaviour shows up as a diff of that file:
// run
//
//	go test ./engine/nftsyntax/ -run Golden -update
//
// and review the diff as part of the change.
var update = flag.Bool("update", false, "rewrite the golden files under testdata/ from the parsers' output")

// valueTexts are literals of every kind the parsers meet: valid values of
// each datatype at their edges, IPv4-mapped and zoned IPv6 addresses,
// prefixes and ranges (valid, reversed, with host bits), names with dashes,
// and text that is none of these.
var valueTexts = []string{
	"", " ", "-", "/", "0", "1", "255", "256", "65535", "65536", "-1", "0x10", "0xffffffff", "0x100000000", "010",
	"0.0.0.0", "10.0.0.1", "255.255.255.255", "256.0.0.1", "1.2.3", "1.2.3.4.5", "01.2.3.4", "1.2.3.4 ",
	"::", "::1", "fd00::1", "fe80::1%eth0", "::ffff:1.2.3.4", "::ffff:10.0.0.1", "1.2.3.4::", "2001:db8::/32",
	"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "fd00::1-fd00::ff", "fd00::ff-fd00::1", "fd00::/64", "fd00::1/64",
	"10.0.0.0/8", "10.0.0.1/8", "10.0.0.1/32", "10.0.0.0/33", "10.0.0.0/-1", "10.0.0.0/x", "0.0.0.0/0",
	"10.0.0.1-10.0.0.9", "10.0.0.9-10.0.0.1", "10.0.0.1-10.0.0.1", "10.0.0.1-", "-10.0.0.1", "10.0.0.1-x",
	"80-90", "90-80", "1-65535", "0-0", "80-", "a-b", "tcp", "udp", "ipv6-icmp", "tcp-udp", "icmpv6", "ip", "dccp",
	"0-5", "250-255", "ipv4", "ipv6", "0x00000001", "0x00000001-0x00000002", "eth0", `"eth0"`, `"veth*"`, `"*"`,
	`"0123456789abcdef"`, `"0123456789abcde"`, `""`, `"a*b*"`, "veth*", "x\x01", `"x` + "\x01" + `"`, "_a-b", ".x-1",
}

func valueTypes() []DataType {
	return append(append([]DataType(nil), dataTypes...), typeNfproto, typeCtState)
}

// renderValues is one line per datatype and text: "TYPE TEXT: value
// RESULT; key part RESULT".
func renderValues(value func(DataType, string) ([]byte, error), keyPart func(DataType, string) (operand, error)) string {
	var b strings.Builder
	for _, dt := range valueTypes() {
		for _, s := range valueTexts {
			v, err := value(dt, s)
			vt := bytesText(v)
			if err != nil {
				vt += " error: " + err.Error()
			}
			o, err := keyPart(dt, s)
			ot := operandText(o)
			if err != nil {
				ot += " error: " + err.Error()
			}
			fmt.Fprintf(&b, "%s %q: value %s; key part %s\n", dt.Name, s, vt, ot)
		}
	}
	return b.String()
}

// bytesText tells nil from empty: a failed parse returns nil.
func bytesText(v []byte) string {
	if v == nil {
		return "nil"
	}
	return fmt.Sprintf("%x", v)
}

func operandText(o operand) string {
	kind := map[operandKind]string{opValue: "value", opPrefix: "prefix", opRange: "range"}[o.kind]
	if kind == "" {
		kind = fmt.Sprintf("kind(%d)", o.kind)
	}
	s := kind + " " + bytesText(o.val)
	if o.hi != nil {
		s += "-" + bytesText(o.hi)
	}
	if o.bits != 0 {
		s += fmt.Sprintf("/%d", o.bits)
	}
	if o.wildcard {
		s += " wildcard"
	}
	if o.elems != nil || o.name != "" || o.flags != 0 {
		s += fmt.Sprintf(" elems=%q name=%q flags=%#x", o.elems, o.name, o.flags)
	}
	return s
}

// TestGoldenValues pins parseValue (with its dotted-quad fast path) and
// parseKeyPart (which parses a text as a value once, then as a range) on
// every edge of every datatype's literals.
func TestGoldenValues(t *testing.T) {
	golden.Check(t, *update, filepath.Join("testdata", "values.golden"), renderValues(parseValue, parseKeyPart))
	// A value has no spare capacity that an append could share.
	for _, dt := range valueTypes() {
		for _, s := range valueTexts {
			if v, _ := parseValue(dt, s); cap(v) != len(v) {
				t.Errorf("parseValue(%s, %q) has spare capacity %d", dt.Name, s, cap(v)-len(v))
			}
		}
	}
}

// dottedQuadAgrees checks parseDottedQuad against netip.ParseAddr: what
// it accepts, netip accepts as the same IPv4 address.
func dottedQuadAgrees(t *testing.T, s string) {
	v, ok := parseDottedQuad(s)
	if !ok {
		return
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() || a.As4() != v {
		t.Errorf("parseDottedQuad(%q) = %v, netip: %v, %v", s, v, a, err)
	}
}

func TestDottedQuad(t *testing.T) {
	for _, s := range append(valueTexts, "0.0.0.0", "1.2.3.4", "255.255.255.255", "256.1.1.1", "1.1.1.256",
		"01.1.1.1", "1.01.1.1", "1.1.1.01", "1.1.1.00", "1..1.1", ".1.1.1", "1.1.1.", "1.1.1", "1.1.1.1.1",
		"1000.1.1.1", "1.1.1.1a", "a1.1.1.1", "1.1.1.-1", "+1.1.1.1", "1.1.1.1%eth0", "١.1.1.1") {
		dottedQuadAgrees(t, s)
	}
	for _, s := range []string{"0.0.0.0", "10.0.0.1", "255.255.255.255", "192.168.100.200"} {
		if _, ok := parseDottedQuad(s); !ok {
			t.Errorf("parseDottedQuad(%q) refused", s)
		}
	}
}

func FuzzDottedQuad(f *testing.F) {
	for _, s := range valueTexts {
		f.Add(s)
	}
	f.Fuzz(dottedQuadAgrees)
}
