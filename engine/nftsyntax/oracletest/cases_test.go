package oracletest

import "github.com/nftguard/nftguard/engine"

// setCase is one named set or map: written through the engine in one
// namespace, declared with nft -f in the other.
type setCase struct {
	name, key, data string // data: "" for a set, "verdict" for a verdict map
	interval        bool
	timeout         bool // flags timeout: declared empty, elements come from AddTimed
	elems           []engine.Element
	comment         string
}

func keys(ks ...string) []engine.Element {
	out := make([]engine.Element, len(ks))
	for i, k := range ks {
		out[i] = engine.Element{Key: k}
	}
	return out
}

// kv builds map entries from alternating key, value strings.
func kv(s ...string) []engine.Element {
	out := make([]engine.Element, 0, len(s)/2)
	for i := 0; i+1 < len(s); i += 2 {
		out = append(out, engine.Element{Key: s[i], Value: s[i+1]})
	}
	return out
}

// The chains verdict maps jump to.
var targetChains = []string{"a", "b"}

var setCases = []setCase{
	// flags timeout (the DNS forwarder's sets)
	{name: "t44", key: "ipv4_addr . ipv4_addr", timeout: true},
	{name: "t66", key: "ipv6_addr . ipv6_addr", timeout: true},
	{name: "tp", key: "inet_proto", timeout: true, comment: "alive"},
	// ipv4_addr
	{name: "a4", key: "ipv4_addr", elems: keys("10.0.0.1", "192.168.1.1", "0.0.0.0", "255.255.255.255")},
	{name: "a4e", key: "ipv4_addr"},
	{name: "a4ie", key: "ipv4_addr", interval: true},
	{name: "a4i", key: "ipv4_addr", interval: true, elems: keys("10.0.0.0/8", "192.168.1.1", "172.16.0.1-172.16.0.9")},
	{name: "a4lo", key: "ipv4_addr", interval: true, elems: keys("0.0.0.0/8", "1.2.3.4")},
	{name: "a4lo1", key: "ipv4_addr", interval: true, elems: keys("0.0.0.0", "0.0.0.2-0.0.0.5")},
	{name: "a4hi", key: "ipv4_addr", interval: true, elems: keys("10.0.0.1", "240.0.0.0-255.255.255.255")},
	{name: "a4hi1", key: "ipv4_addr", interval: true, elems: keys("255.255.255.255", "255.255.255.0-255.255.255.253")},
	{name: "a4both", key: "ipv4_addr", interval: true, elems: keys("0.0.0.0-9.255.255.255", "11.0.0.0-255.255.255.255")},
	{name: "a4all", key: "ipv4_addr", interval: true, elems: keys("0.0.0.0/0")},
	{name: "a4allr", key: "ipv4_addr", interval: true, elems: keys("0.0.0.0-255.255.255.255")},
	{name: "a4adj", key: "ipv4_addr", interval: true, elems: keys("10.0.0.0/8", "11.0.0.0/8", "12.0.0.1")},
	{name: "a4rng", key: "ipv4_addr", interval: true, elems: keys("10.0.0.0-10.255.255.255", "192.0.2.0-192.0.2.127", "192.0.2.129-192.0.2.130", "198.51.100.7/32")},
	{name: "a4cmt", key: "ipv4_addr", elems: keys("10.1.1.1"), comment: "pods of x/a"},
	// ipv6_addr
	{name: "a6", key: "ipv6_addr", elems: keys("fd00::1", "::1", "::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "::ffff:10.0.0.1")},
	{name: "a6i", key: "ipv6_addr", interval: true, elems: keys("fd00::/64", "::1", "fd01::1-fd01::ff", "2001:db8::/32")},
	{name: "a6lo", key: "ipv6_addr", interval: true, elems: keys("::/8", "fd00::1")},
	{name: "a6lo1", key: "ipv6_addr", interval: true, elems: keys("::", "::2-::5")},
	{name: "a6hi", key: "ipv6_addr", interval: true, elems: keys("fd00::1", "ff00::/8")},
	{name: "a6hi1", key: "ipv6_addr", interval: true, elems: keys("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")},
	{name: "a6all", key: "ipv6_addr", interval: true, elems: keys("::/0")},
	// inet_proto
	{name: "p", key: "inet_proto", elems: keys("tcp", "udp", "icmp", "ipv6-icmp", "sctp")},
	{name: "pn", key: "inet_proto", elems: keys("0", "4", "33", "255")},
	{name: "pi", key: "inet_proto", interval: true, elems: keys("0-5", "tcp", "17", "250-255")},
	// inet_service
	{name: "sv", key: "inet_service", elems: keys("22", "80", "443", "0", "65535")},
	{name: "svi", key: "inet_service", interval: true, elems: keys("0-1023", "8080", "60000-65535")},
	{name: "svi1", key: "inet_service", interval: true, elems: keys("0", "65535", "80-81")},
	{name: "svall", key: "inet_service", interval: true, elems: keys("0-65535")},
	// mark
	{name: "mk", key: "mark", elems: keys("0x00000001", "0x00008000", "0x00000000", "0xffffffff", "0x12345678")},
	// Mark ranges are refused by nftsyntax (see refusedCases); single
	// values in an interval set exercise the network byte order nft uses
	// for mark keys of interval sets (marks are host order elsewhere).
	{name: "mki", key: "mark", interval: true, elems: keys("0x00000000", "0x00000100", "0x12345678", "0xffffffff")},
	{name: "mki1", key: "mark", interval: true, elems: keys("0x00000010", "0x00000011", "0x00010000")},
	// ifname
	{name: "ifn", key: "ifname", elems: keys(`"eth0"`, `"lo"`, `"veth0123456789a"`)},
	{name: "ifni", key: "ifname", interval: true, elems: keys(`"eth0"`, `"veth*"`, `"lo"`)},
	{name: "ifni2", key: "ifname", interval: true, elems: keys(`"cali*"`, `"e*"`, `"lxc*"`, `"tun0"`)},
	// concatenations
	{name: "c3", key: "ipv4_addr . inet_proto . inet_service", elems: keys("10.0.0.1 . tcp . 80", "10.0.0.2 . udp . 53", "0.0.0.0 . sctp . 0", "255.255.255.255 . 255 . 65535")},
	{name: "c3i", key: "ipv4_addr . inet_proto . inet_service", interval: true, elems: keys("10.0.0.0/8 . tcp . 80-90", "1.1.1.1 . udp . 53", "0.0.0.0-0.255.255.255 . sctp . 0-65535", "192.168.0.0/16 . tcp . 443", "255.255.255.255 . udp . 65535")},
	{name: "c6", key: "ipv6_addr . inet_service", elems: keys("fd00::1 . 80", "::1 . 53", ":: . 0")},
	{name: "c6i", key: "ipv6_addr . inet_service", interval: true, elems: keys("fd00::/64 . 80", "::1 . 1-1024", "ff00::/8 . 0-65535")},
	{name: "c4if", key: "ipv4_addr . ifname", elems: keys(`10.0.0.1 . "eth0"`, `10.0.0.2 . "veth0"`)},
	{name: "c4ifi", key: "ipv4_addr . ifname", interval: true, elems: keys(`10.0.0.0/24 . "veth*"`, `10.0.1.1 . "eth0"`)},
	{name: "c3e", key: "ipv4_addr . inet_proto . inet_service", interval: true},
	// verdict maps
	{name: "vm4", key: "ipv4_addr", data: "verdict", elems: kv("10.0.0.1", "accept", "10.0.0.2", "jump a", "10.0.0.3", "drop", "10.0.0.4", "goto b")},
	{name: "vm4i", key: "ipv4_addr", data: "verdict", interval: true, elems: kv("10.0.0.0/8", "accept", "11.0.0.1", "jump a", "0.0.0.0/8", "drop", "240.0.0.0/4", "goto b")},
	{name: "vm4rc", key: "ipv4_addr", data: "verdict", elems: kv("10.0.0.1", "return", "10.0.0.2", "continue")},
	{name: "vm6", key: "ipv6_addr", data: "verdict", elems: kv("fd00::1", "jump a", "::1", "accept")},
	{name: "vm6i", key: "ipv6_addr", data: "verdict", interval: true, elems: kv("fd00::/64", "jump a", "::/8", "drop", "ff00::/8", "goto b")},
	{name: "vmp", key: "inet_proto", data: "verdict", elems: kv("tcp", "jump a", "udp", "goto b")},
	{name: "vmsv", key: "inet_service", data: "verdict", elems: kv("80", "jump a", "443", "drop")},
	{name: "vmsvi", key: "inet_service", data: "verdict", interval: true, elems: kv("0-1023", "jump a", "65535", "drop")},
	{name: "vmmk", key: "mark", data: "verdict", elems: kv("0x00000010", "drop", "0x00000020", "jump a")},
	{name: "vmif", key: "ifname", data: "verdict", elems: kv(`"eth0"`, "jump a", `"lo"`, "accept")},
	{name: "vmifi", key: "ifname", data: "verdict", interval: true, elems: kv(`"veth*"`, "jump a", `"eth0"`, "accept")},
	{name: "vm3", key: "ipv4_addr . inet_proto . inet_service", data: "verdict", elems: kv("10.0.0.1 . tcp . 80", "jump a", "10.0.0.1 . udp . 53", "drop")},
	{name: "vm3i", key: "ipv4_addr . inet_proto . inet_service", data: "verdict", interval: true, elems: kv("10.0.0.0/24 . tcp . 80", "jump a", "10.0.1.1 . udp . 1-1024", "drop", "0.0.0.0/0 . sctp . 0-65535", "goto b")},
	{name: "vm6s", key: "ipv6_addr . inet_service", data: "verdict", elems: kv("fd00::1 . 80", "jump a")},
	{name: "vm4if", key: "ipv4_addr . ifname", data: "verdict", interval: true, elems: kv(`10.0.0.0/24 . "veth*"`, "jump a")},
	{name: "vme", key: "ipv4_addr", data: "verdict"},
	// address maps
	{name: "am", key: "ipv4_addr", data: "ipv4_addr", elems: kv("10.0.0.1", "192.0.2.1", "10.0.0.2", "192.0.2.2", "0.0.0.0", "255.255.255.255")},
	{name: "ami", key: "ipv4_addr", data: "ipv4_addr", interval: true, elems: kv("10.0.0.0/8", "192.0.2.1", "172.16.0.1-172.16.0.9", "192.0.2.2", "240.0.0.0-255.255.255.255", "192.0.2.3")},
	{name: "am6", key: "ipv6_addr", data: "ipv6_addr", elems: kv("fd00::1", "2001:db8::1", "::", "::1")},
	{name: "am6i", key: "ipv6_addr", data: "ipv6_addr", interval: true, elems: kv("fd00::/64", "2001:db8::1", "::/8", "2001:db8::2")},
	{name: "ame", key: "ipv4_addr", data: "ipv4_addr"},
}
