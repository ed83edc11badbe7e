package nftsyntax

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/nftguard/nftguard/engine/nftwire"
	"github.com/nftguard/nftguard/internal/testns"
)

func hexKeys(es []nftwire.Elem) []string {
	var out []string
	for _, e := range es {
		s := hex.EncodeToString(e.Key)
		if e.KeyEnd != nil {
			s += "-" + hex.EncodeToString(e.KeyEnd)
		}
		if e.IntervalEnd {
			s += " end"
		}
		out = append(out, s)
	}
	return out
}

// TestMarkIntervalByteOrder pins the kernel keys nft 1.0.6 writes for mark
// sets (as dumped by `nft --debug=netlink`): host order in plain sets,
// network order in interval sets, map data host order either way.
func TestMarkIntervalByteOrder(t *testing.T) {
	for _, c := range []struct {
		key, data string
		interval  bool
		elems     []ElementText
		want      []string
	}{
		{"mark", "", false, et("0x100", "0x12345678"), []string{"00010000", "78563412"}},
		{"mark", "", true, et("0x100", "0x12345678"), []string{"00000000 end", "00000100", "00000101 end", "12345678", "12345679 end"}},
		{"mark", "", true, et("0x00000000", "0xffffffff"), []string{"00000000", "00000001 end", "ffffffff"}},
		{"ipv4_addr . mark", "", true, et("10.0.0.0/8 . 0x100"), []string{"0a00000000000100-0affffff00000100"}},
		{"ipv4_addr . mark", "", false, et("10.0.0.1 . 0x100"), []string{"0a00000100010000"}},
	} {
		d, err := ParseSetDecl("x", c.key, c.data, c.interval)
		if err != nil {
			t.Fatal(err)
		}
		enc, err := EncodeElements(d, c.elems)
		if err != nil {
			t.Fatalf("%s interval=%v: %v", c.key, c.interval, err)
		}
		if got := hexKeys(enc); strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s interval=%v %v: keys %q, want %q", c.key, c.interval, c.elems, got, c.want)
		}
		if ud := SetUserData(d); !bytes.HasPrefix(ud, []byte{0, 4, byteorderHost, 0, 0, 0}) && !d.Key.IsConcat() {
			t.Errorf("%s interval=%v: set user data %x does not record host byte order", c.key, c.interval, ud)
		}
	}

	// Map data stays host order in an interval map.
	d, _ := ParseSetDecl("x", "ipv4_addr", "mark", true)
	enc, err := EncodeElements(d, []ElementText{{Key: "10.0.0.0/8", Value: "0x100"}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc[1].Data, []byte{0, 1, 0, 0}) {
		t.Errorf("interval map mark data = %x, want 00010000", enc[1].Data)
	}

	// nft's own elements decode, including a range it prints as a prefix.
	d, _ = ParseSetDecl("x", "mark", "", true)
	dec, err := DecodeElements(d, []nftwire.Elem{
		{Key: []byte{0, 0, 0, 0}, IntervalEnd: true},
		{Key: []byte{0, 0, 0, 0x10}}, {Key: []byte{0, 0, 0, 0x20}, IntervalEnd: true},
		{Key: []byte{0, 0, 1, 0}}, {Key: []byte{0, 0, 1, 1}, IntervalEnd: true},
		{Key: []byte{0, 0, 2, 0}}, {Key: []byte{0, 0, 2, 3}, IntervalEnd: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(dec); got != "[{0x00000010/28 } {0x00000100 } {0x00000200-0x00000202 }]" {
		t.Errorf("DecodeElements of nft's mark interval elements = %s", got)
	}
}

// TestMarkIntervalLookup pins what nft 1.0.6 compiles for a lookup of a
// mark in an interval set: a byteorder hton right after the load.
func TestMarkIntervalLookup(t *testing.T) {
	sets := testSets()
	for _, c := range []struct {
		rule string
		want []string // expression types
	}{
		{"meta mark @mki", []string{"Meta", "Byteorder reg 1", "Lookup"}},
		{"meta mark @mk", []string{"Meta", "Lookup"}},
		{"meta mark vmap @mkvi", []string{"Meta", "Byteorder reg 1", "Lookup"}},
		{"ip saddr . meta mark @cmi", []string{"Meta", "Cmp", "Payload", "Meta", "Byteorder reg 9", "Lookup"}},
		{"ip saddr . meta mark @cm", []string{"Meta", "Cmp", "Payload", "Meta", "Lookup"}},
		{"snat ip to meta mark map @ammi", []string{"Meta", "Byteorder reg 1", "Lookup", "NAT"}},
	} {
		cr, err := CompileRule(inet, c.rule, sets)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range cr.Exprs {
			// The type's name without its package (the values are
			// nftwire's aliases of another module's types).
			s := fmt.Sprintf("%T", e)
			s = s[strings.LastIndexByte(s, '.')+1:]
			if b, ok := e.(*nftwire.Byteorder); ok {
				if b.Op != nftwire.ByteorderHton || b.Len != 4 || b.Size != 4 || b.SourceRegister != b.DestRegister {
					t.Errorf("%s: byteorder %+v", c.rule, *b)
				}
				s += fmt.Sprintf(" reg %d", b.DestRegister)
			}
			got = append(got, s)
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s compiles to %v, want %v", c.rule, got, c.want)
		}
	}
	// A lookup that disagrees with the set on the conversion is not what
	// nft writes, and is refused rather than rendered as if it were.
	good, err := CompileRule(inet, "meta mark @mki", sets)
	if err != nil {
		t.Fatal(err)
	}
	bad := &Compiled{Exprs: []nftwire.Expr{good.Exprs[0], good.Exprs[2]}}
	if _, err := RenderRule(inet, bad, sets); err == nil || !strings.Contains(err.Error(), "without the byteorder") {
		t.Errorf("lookup of a mark in an interval set without hton: error %v", err)
	}
	bad = &Compiled{Exprs: []nftwire.Expr{good.Exprs[0], good.Exprs[1], &nftwire.Lookup{SourceRegister: 1, SetName: "mk"}}}
	if _, err := RenderRule(inet, bad, sets); err == nil || !strings.Contains(err.Error(), "non-interval") {
		t.Errorf("hton before a lookup in a plain set: error %v", err)
	}
}

func TestProtocolNames(t *testing.T) {
	for _, c := range []struct {
		num  byte
		name string
	}{{0, "ip"}, {1, "icmp"}, {4, "ipencap"}, {6, "tcp"}, {7, "7"}, {33, "dccp"}, {58, "ipv6-icmp"}, {93, "ax.25"}, {143, "ethernet"}, {144, "144"}, {255, "255"}} {
		if got, _ := formatValue(TypeInetProto, []byte{c.num}); got != c.name {
			t.Errorf("formatValue(%d) = %q, want %q", c.num, got, c.name)
		}
		if b, err := parseValue(TypeInetProto, c.name); err != nil || b[0] != c.num {
			t.Errorf("parseValue(%q) = %v, %v; want %d", c.name, b, err, c.num)
		}
	}
	for name, num := range map[string]byte{"hopopt": 0, "HOPOPT": 0, "IP": 0, "IPv6-ICMP": 58, "icmpv6": 58, "CPHB": 73, "IPSEC-ESP": 50, "0x21": 33} {
		if b, err := parseValue(TypeInetProto, name); err != nil || b[0] != num {
			t.Errorf("parseValue(%q) = %v, %v; want %d", name, b, err, num)
		}
	}
	// nft truncates mptcp (262) to tcp; names are case-sensitive.
	for _, name := range []string{"mptcp", "Tcp", "ipv6-ICMP", "256", "bogus"} {
		if _, err := parseValue(TypeInetProto, name); err == nil {
			t.Errorf("parseValue(%q) accepted", name)
		}
	}
}

// TestOracleProtocols checks the compiled-in protocol table against nft
// itself: the name nft prints for every number, and the number nft reads
// for every name and alias.
func TestOracleProtocols(t *testing.T) {
	ns := testns.New(t, "synp")
	var nums, named []string
	for i := 0; i < 256; i++ {
		nums = append(nums, fmt.Sprint(i))
	}
	var names []string
	for n := range protoNumbers {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		named = append(named, fmt.Sprintf("%s . %d", n, i))
	}
	ns.MustExec(t, fmt.Sprintf("table inet %s {\n\tset pnum { type inet_proto; elements = { %s }; }\n\tset pname { type inet_proto . inet_service; elements = { %s }; }\n}\n",
		tableName, strings.Join(nums, ", "), strings.Join(named, ", ")), "nft", "-f", "-")
	items := func(set string) []string {
		out := ns.MustExec(t, "", "nft", "list", "set", "inet", tableName, set)
		i := strings.Index(out, "elements = {")
		j := strings.LastIndex(out, "}\n\t}")
		if i < 0 || j < i {
			t.Fatalf("cannot parse nft list set %s:\n%s", set, out)
		}
		var its []string
		for _, it := range strings.Split(out[i+len("elements = {"):j], ",") {
			if it = strings.Join(strings.Fields(it), " "); it != "" {
				its = append(its, it)
			}
		}
		return its
	}
	var want []string
	for i := 0; i < 256; i++ {
		s, _ := formatValue(TypeInetProto, []byte{byte(i)})
		want = append(want, s)
	}
	got := items("pnum")
	if len(got) != 256 {
		t.Fatalf("nft listed %d protocols, want 256", len(got))
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("nft prints protocols 0-255 as\n%v\nwe print\n%v", got, want)
	}
	byIndex := map[string]string{}
	for _, it := range items("pname") {
		p := strings.Split(it, " . ")
		if len(p) != 2 {
			t.Fatalf("bad item %q", it)
		}
		byIndex[p[1]] = p[0]
	}
	if len(byIndex) != len(names) {
		t.Fatalf("nft listed %d named elements, want %d", len(byIndex), len(names))
	}
	for i, n := range names {
		b, err := parseValue(TypeInetProto, n)
		if err != nil {
			t.Fatal(err)
		}
		ours, _ := formatValue(TypeInetProto, b)
		if nft := byIndex[fmt.Sprint(i)]; nft != ours {
			t.Errorf("%q: nft reads and prints it as %q, we as %q", n, nft, ours)
		}
	}
}
