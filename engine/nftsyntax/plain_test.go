package nftsyntax

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nftguard/nftguard/engine/nftwire"
)

// encodePlainSlow is EncodeElements for a set without flags interval
// written as plainly as possible, on the general element parser that
// interval sets use: parse every element (key, then value) and stop at
// the first that does not parse; then, element by element, refuse a range
// or prefix and a key seen before. encodePlain must give its output byte
// for byte and its errors word for word.
func encodePlainSlow(d SetDecl, elems []ElementText) ([]nftwire.Elem, error) {
	parts := make([][]span, len(elems))
	out := make([]nftwire.Elem, len(elems))
	for i, et := range elems {
		var err error
		parts[i], err = parseElementKey(d, et.Key)
		if err == nil {
			err = encodeValue(d, et.Value, &out[i])
		}
		if err != nil {
			return nil, fmt.Errorf("set %s element %q: %w", d.Name, et.Key, err)
		}
	}
	seen := map[string]bool{}
	for i, et := range elems {
		for j, p := range parts[i] {
			if !bytes.Equal(p.lo, p.hi) {
				return nil, fmt.Errorf("set %s element %q: a range or prefix needs flags interval", d.Name, et.Key)
			}
			out[i].Key = appendField(out[i].Key, d.Key, j, p.lo)
		}
		if seen[string(out[i].Key)] {
			return nil, fmt.Errorf("set %s: duplicate element %q", d.Name, et.Key)
		}
		seen[string(out[i].Key)] = true
	}
	return out, nil
}

// plainDecls are set declarations without flags interval, of every key
// type, plain, concatenated, and maps.
func plainDecls(t testing.TB) []SetDecl {
	var out []SetDecl
	for _, k := range []string{"ipv4_addr", "ipv6_addr", "inet_proto", "inet_service", "mark", "ifname",
		"ipv4_addr . inet_service", "ipv4_addr . inet_proto . inet_service", "ipv6_addr . inet_service",
		"ipv6_addr . ipv6_addr", "ifname . mark", "inet_proto . inet_service"} {
		for _, data := range []string{"", "verdict", "ipv4_addr", "mark"} {
			d, err := ParseSetDecl("s", k, data, false)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
	}
	return out
}

// plainCases are element lists, valid and not, that encodePlain must
// treat exactly as encodePlainSlow does.
var plainCases = [][]ElementText{
	nil,
	et(),
	et("10.0.0.1", "10.0.0.2", "255.255.255.255", "0.0.0.0"),
	et("10.0.0.1", "10.0.0.2", "10.0.0.1"),
	et(" 10.0.0.1", "10.0.0.1 "),
	et("10.0.0.1", "10.0.0.0/8", "10.0.0.1"),
	et("10.0.0.1", "10.0.0.1", "10.0.0.0/8"),
	et("10.0.0.1/32", "10.0.0.1"),
	et("10.0.0.5-10.0.0.5", "10.0.0.6"),
	et("10.0.0.1-10.0.0.9"),
	et("10.0.0.1", "bogus", "10.0.0.0/8"),
	et("10.0.0.0/8", "bogus"),
	et("::ffff:1.2.3.4"),
	et("::ffff:1.2.3.4", "1.2.3.4"),
	et("fd00::1", "::1", "fd00::1"),
	et("fd00::1", "fe80::1%eth0"),
	et("fd00::/64", "fd00::1"),
	et("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "::"),
	et("tcp", "udp", "ipv6-icmp", "6"),
	et("tcp", "tcp-udp"),
	et("0-5"),
	et("22", "80", "443", "65535", "0"),
	et("22", "22"),
	et("80-90"),
	et("0x00000001", "0x00008000", "1"),
	et(`"eth0"`, `"lo"`, "eth1"),
	et(`"eth0"`, "eth0"),
	et(`"veth*"`),
	et(`"0123456789abcdef"`),
	et("10.0.0.1 . 80", "10.0.0.1 . 81", "10.0.0.1 . 80"),
	et("10.0.0.1 . tcp . 80", "10.0.0.2 . udp . 53"),
	et("10.0.0.1 . tcp . 80-90"),
	et("10.0.0.1 .tcp . 80"),
	et("10.0.0.1 . tcp . 80 . 1"),
	et("10.0.0.1 .  . 80"),
	et("fd00::1 . 80", "::1 . 53", "::ffff:1.2.3.4 . 1"),
	et("fd00::1 . fd00::2", "fd00::1 . fd00::2"),
	et(`"eth0" . 0x00000001`, `"veth*" . 0x1`),
	et("tcp . 80", "udp . 53", "6 . 80"),
	et("10.0.0.1 . 80"),
	{{"10.0.0.1", "accept"}, {"10.0.0.2", "jump a"}, {"10.0.0.3", "drop"}},
	{{"10.0.0.1", "accept"}, {"10.0.0.1", "drop"}},
	{{"10.0.0.1", "jump"}, {"10.0.0.2", "accept"}},
	{{"10.0.0.1", "192.0.2.1"}, {"10.0.0.2", "fd00::1"}},
	{{"10.0.0.1", ""}, {"10.0.0.2", "0x1"}},
	{{"10.0.0.1", "0x1"}},
	{{"bogus", "bogus"}},
	{{"10.0.0.0/8", "0x1"}, {"bogus", "0x1"}},
}

// bigPlainCases are lists long enough for encodePlain to find duplicates
// with a map (keyed by 4 or 16 bytes or by string, by key length), with a
// duplicate or a range early, late, or both.
func bigPlainCases() [][]ElementText {
	var out [][]ElementText
	for _, f := range []func(i int) string{
		func(i int) string { return fmt.Sprintf("10.0.%d.%d", i/256, i%256) },
		func(i int) string { return fmt.Sprintf("fd00::%x", i) },
		func(i int) string { return fmt.Sprintf("%d", 1000+i) },
		func(i int) string { return fmt.Sprintf("10.0.0.%d . %d", i%256, i) },
		func(i int) string { return fmt.Sprintf("fd00::%x . fd00::1", i) },
		func(i int) string { return fmt.Sprintf("%q", fmt.Sprintf("eth%d", i)) },
	} {
		plain := make([]ElementText, 40)
		for i := range plain {
			plain[i] = ElementText{Key: f(i)}
		}
		out = append(out, plain)
		for _, at := range [][2]int{{20, 3}, {39, 38}, {17, 0}} {
			dup := append([]ElementText(nil), plain...)
			dup[at[0]] = dup[at[1]]
			out = append(out, dup)
		}
		ranged := append([]ElementText(nil), plain...)
		ranged[30] = ElementText{Key: "10.0.0.0/8"}
		out = append(out, ranged)
		both := append([]ElementText(nil), ranged...)
		both[35] = both[2]
		out = append(out, both)
		early := append([]ElementText(nil), both...)
		early[25] = early[1]
		out = append(out, early)
	}
	return out
}

func TestEncodePlainMatchesSlow(t *testing.T) {
	for _, d := range plainDecls(t) {
		for _, elems := range append(plainCases, bigPlainCases()...) {
			got, err := EncodeElements(d, elems)
			want, wantErr := encodePlainSlow(d, elems)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Errorf("%s %v: %v\nerror %v\nwant  %v", d.Key, d.Data, elems, err, wantErr)
				continue
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s %v: %v (-encodePlainSlow +EncodeElements):\n%s", d.Key, d.Data, elems, diff)
			}
		}
	}
}

// TestEncodePlainKeysApart: keys share one buffer, yet appending to one
// must not change the next.
func TestEncodePlainKeysApart(t *testing.T) {
	d, _ := ParseSetDecl("s", "ipv4_addr", "", false)
	got, err := EncodeElements(d, et("10.0.0.1", "10.0.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	_ = append(got[0].Key, 0xff)
	if !bytes.Equal(got[1].Key, []byte{10, 0, 0, 2}) {
		t.Errorf("second key changed to %x", got[1].Key)
	}
}

func FuzzEncodePlain(f *testing.F) {
	for _, c := range plainCases {
		var keys, values []string
		for _, e := range c {
			keys, values = append(keys, e.Key), append(values, e.Value)
		}
		f.Add(uint8(0), strings.Join(keys, ","), strings.Join(values, ","))
	}
	decls := plainDecls(f)
	f.Fuzz(func(t *testing.T, which uint8, keys, values string) {
		d := decls[int(which)%len(decls)]
		var elems []ElementText
		vs := strings.Split(values, ",")
		for i, k := range strings.Split(keys, ",") {
			e := ElementText{Key: k}
			if i < len(vs) {
				e.Value = vs[i]
			}
			elems = append(elems, e)
		}
		got, err := EncodeElements(d, elems)
		want, wantErr := encodePlainSlow(d, elems)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("%s %v: %q\nerror %v\nwant  %v", d.Key, d.Data, elems, err, wantErr)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s %v: %q (-encodePlainSlow +EncodeElements):\n%s", d.Key, d.Data, elems, diff)
		}
	})
}
