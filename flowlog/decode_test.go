package flowlog

import (
	"encoding/binary"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/tablelayout"
)

// packetMsg builds an NFULNL_MSG_PACKET body as the kernel sends it.
func packetMsg(af byte, group uint16, prefix string, payload []byte) []byte {
	b := []byte{af, unix.NFNETLINK_V0, 0, 0}
	binary.BigEndian.PutUint16(b[2:], group)
	b = appendAttr(b, attrPacketHdr, []byte{0x08, 0x00, 2, 0})
	b = appendAttr(b, attrIfIndexIn, be32(4))
	b = appendAttr(b, attrIfIndexOut, be32(3))
	b = appendAttr(b, attrPrefix, append([]byte(prefix), 0))
	return appendAttr(b, attrPayload, payload)
}

func ipv4(proto byte, frag uint16, l4 []byte) []byte {
	p := make([]byte, 20, 20+len(l4))
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(20+len(l4)))
	binary.BigEndian.PutUint16(p[6:], frag)
	p[9] = proto
	copy(p[12:], []byte{10, 0, 0, 1})
	copy(p[16:], []byte{10, 0, 0, 2})
	return append(p, l4...)
}

func ipv6(next byte, rest []byte) []byte {
	p := make([]byte, 40, 40+len(rest))
	p[0] = 0x60
	binary.BigEndian.PutUint16(p[4:], uint16(len(rest)))
	p[6] = next
	src, dst := netip.MustParseAddr("fd00::1").As16(), netip.MustParseAddr("fd00::2").As16()
	copy(p[8:], src[:])
	copy(p[24:], dst[:])
	return append(p, rest...)
}

var ports = []byte{0x30, 0x39, 0x00, 0x50, 0, 0, 0, 0} // 12345 -> 80

func TestDecode(t *testing.T) {
	hop := append([]byte{unix.IPPROTO_FRAGMENT, 0, 0, 0, 0, 0, 0, 0}, // hop-by-hop, 8 bytes
		unix.IPPROTO_UDP, 0, 0, 0, 0, 0, 0, 1) // first fragment
	for name, tc := range map[string]struct {
		msg  []byte
		want string
	}{
		"ipv4 tcp":        {packetMsg(unix.AF_INET, 7, tablelayout.LogPrefixIngress, ipv4(unix.IPPROTO_TCP, 0, ports)), "ingress 4 10.0.0.1 10.0.0.2 tcp 12345 80 false 0"},
		"ipv4 icmp":       {packetMsg(unix.AF_INET, 7, tablelayout.LogPrefixEgress, ipv4(unix.IPPROTO_ICMP, 0, []byte{8, 0, 0, 0})), "egress 4 10.0.0.1 10.0.0.2 icmp 0 0 true 8"},
		"ipv4 later frag": {packetMsg(unix.AF_INET, 7, tablelayout.LogPrefixEgress, ipv4(unix.IPPROTO_UDP, 100, ports)), "egress 4 10.0.0.1 10.0.0.2 udp 0 0 false 0"},
		"ipv4 truncated":  {packetMsg(unix.AF_INET, 7, tablelayout.LogPrefixEgress, ipv4(unix.IPPROTO_SCTP, 0, nil)), "egress 4 10.0.0.1 10.0.0.2 sctp 0 0 false 0"},
		"ipv6 sctp":       {packetMsg(unix.AF_INET6, 7, tablelayout.LogPrefixIngress, ipv6(unix.IPPROTO_SCTP, ports)), "ingress 6 fd00::1 fd00::2 sctp 12345 80 false 0"},
		"ipv6 icmpv6":     {packetMsg(unix.AF_INET6, 7, tablelayout.LogPrefixIngress, ipv6(unix.IPPROTO_ICMPV6, []byte{128, 0, 0, 0})), "ingress 6 fd00::1 fd00::2 icmpv6 0 0 true 128"},
		"ipv6 ext hdrs":   {packetMsg(unix.AF_INET6, 7, tablelayout.LogPrefixIngress, ipv6(unix.IPPROTO_HOPOPTS, append(hop, ports...))), "ingress 6 fd00::1 fd00::2 udp 12345 80 false 0"},
		"ipv6 ah": {packetMsg(unix.AF_INET6, 7, tablelayout.LogPrefixIngress, ipv6(unix.IPPROTO_AH,
			append([]byte{unix.IPPROTO_TCP, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1}, ports...))), "ingress 6 fd00::1 fd00::2 tcp 12345 80 false 0"}, // 12 bytes: (1+2)*4
		"ipv6 later frag": {packetMsg(unix.AF_INET6, 7, tablelayout.LogPrefixIngress, ipv6(unix.IPPROTO_FRAGMENT,
			append([]byte{unix.IPPROTO_UDP, 0, 0, 8, 0, 0, 0, 1}, ports...))), "ingress 6 fd00::1 fd00::2 udp 0 0 false 0"},
		"ipv6 ext hdr past payload": {packetMsg(unix.AF_INET6, 7, tablelayout.LogPrefixIngress, ipv6(unix.IPPROTO_DSTOPTS,
			[]byte{unix.IPPROTO_UDP, 1, 0, 0, 0, 0, 0, 0})), "ingress 6 fd00::1 fd00::2 60 0 0 false 0"}, // says 16 bytes, has 8
		"ipv6 ext hdr truncated": {packetMsg(unix.AF_INET6, 7, tablelayout.LogPrefixIngress, ipv6(unix.IPPROTO_AH,
			[]byte{unix.IPPROTO_UDP, 1, 0, 0})), "ingress 6 fd00::1 fd00::2 51 0 0 false 0"},
		"foreign prefix": {packetMsg(unix.AF_INET, 7, "someone else", ipv4(unix.IPPROTO_UDP, 0, ports)), " 4 10.0.0.1 10.0.0.2 udp 12345 80 false 0"},
		"no payload":     {packetMsg(unix.AF_INET, 7, tablelayout.LogPrefixIngress, nil), "ingress 4 invalid IP invalid IP 0 0 0 false 0"},
	} {
		r, err := decodeMessage(tc.msg)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		got := strings.Join([]string{string(r.Direction), itoa(r.Family), r.Src.String(), r.Dst.String(), r.ProtocolName(),
			itoa(int(r.SrcPort)), itoa(int(r.DstPort)), boolText(r.HasICMP), itoa(int(r.ICMPType))}, " ")
		if got != tc.want {
			t.Errorf("%s: got %q, want %q", name, got, tc.want)
		}
		if r.Group != 7 || r.InIfindex != 4 || r.OutIfindex != 3 {
			t.Errorf("%s: group %d, interfaces %d %d", name, r.Group, r.InIfindex, r.OutIfindex)
		}
	}
	// Malformed attributes are an error, never a panic.
	for _, b := range [][]byte{nil, {2, 0}, {2, 0, 0, 7, 200, 0, 9, 0}, {2, 0, 0, 7, 2, 0, 9, 0}} {
		if _, err := decodeMessage(b); err == nil {
			t.Errorf("%x decodes", b)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// FuzzDecode: any bytes decode without a panic.
func FuzzDecode(f *testing.F) {
	f.Add(packetMsg(unix.AF_INET6, 7, tablelayout.LogPrefixIngress, ipv6(unix.IPPROTO_HOPOPTS, ports)))
	f.Add(packetMsg(unix.AF_INET, 7, tablelayout.LogPrefixIngress, ipv4(unix.IPPROTO_TCP, 0, ports)))
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = decodeMessage(b) })
}

func TestJournal(t *testing.T) {
	j := NewJournal(3)
	for i := range 5 {
		j.Add(Record{DstPort: uint16(i)})
	}
	var got []int
	for _, r := range j.Recent() {
		got = append(got, int(r.DstPort))
	}
	if len(got) != 3 || got[0] != 2 || got[2] != 4 {
		t.Errorf("recent: %v, want [2 3 4]", got)
	}
	if rec, over := j.Counts(); rec != 5 || over != 2 {
		t.Errorf("counts %d %d, want 5 2", rec, over)
	}
}

func TestResolveWithoutPods(t *testing.T) {
	r := Record{Direction: Egress, Src: netip.MustParseAddr("10.0.0.9")}
	Resolve(&r, nil)
	if r.Decision != "pod at 10.0.0.9 isolated for egress; no rule allowed (pod not known to this reader)" {
		t.Errorf("decision %q", r.Decision)
	}
	r = Record{Prefix: "other"}
	Resolve(&r, NewObjects(nil, nil))
	if !strings.Contains(r.Decision, "not by nftguard's table") {
		t.Errorf("decision %q", r.Decision)
	}
}

// ifResolver knows one pod's interface.
type ifResolver struct{ Resolver }

func (ifResolver) PodByIfindex(i uint32) string {
	if i == 7 {
		return "x/a"
	}
	return ""
}

// A forged packet is the pod's whose interface it came in by, never the
// pod its (forged) source names.
func TestResolveForged(t *testing.T) {
	if d := directionOf("nftguard forged source"); d != Forged {
		t.Fatalf("direction %q", d)
	}
	res := ifResolver{NewObjects(nil, nil)}
	r := Record{Direction: Forged, Src: netip.MustParseAddr("10.0.0.3"), InIfindex: 7}
	Resolve(&r, res)
	if r.Pod != "x/a" || r.SrcPod != "x/a" || !strings.Contains(r.Decision, "not an address of pod x/a") {
		t.Errorf("resolved %+v", r)
	}
	r = Record{Direction: Forged, Src: netip.MustParseAddr("10.0.0.3"), InIfindex: 8}
	Resolve(&r, res)
	if r.Pod != "" || !strings.Contains(r.Decision, "no address of the pod it came from (interface 8)") {
		t.Errorf("resolved %+v", r)
	}
	r = Record{Direction: Forged, Src: netip.MustParseAddr("10.0.0.3"), InIfindex: 7}
	Resolve(&r, nil)
	if r.Pod != "" {
		t.Errorf("without a resolver: %+v", r)
	}
}
