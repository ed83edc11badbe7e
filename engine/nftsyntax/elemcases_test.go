package nftsyntax

type elementCase struct {
	name, key, data string
	interval        bool
	elems           []ElementText
	want            []ElementText // canonical when different (sorted for interval sets)
}

func et(keys ...string) []ElementText {
	out := make([]ElementText, len(keys))
	for i, k := range keys {
		out[i] = ElementText{Key: k}
	}
	return out
}

var elementCases = []elementCase{
	{name: "a4", key: "ipv4_addr", elems: et("10.0.0.1", "10.0.0.2", "192.168.1.1")},
	{name: "a4i", key: "ipv4_addr", interval: true, elems: et("10.0.0.0/8", "192.168.1.1", "172.16.0.1-172.16.0.9"),
		want: et("10.0.0.0/8", "172.16.0.1-172.16.0.9", "192.168.1.1")},
	{name: "a4z", key: "ipv4_addr", interval: true, elems: et("0.0.0.0/8", "255.255.255.255")},
	{name: "a4adj", key: "ipv4_addr", interval: true, elems: et("10.0.0.0/8", "11.0.0.0/8", "12.0.0.1")},
	{name: "a4range", key: "ipv4_addr", interval: true, elems: et("10.0.0.0-10.255.255.255", "10.0.0.0/8"[:0]+"192.0.2.0-192.0.2.255"),
		want: et("10.0.0.0/8", "192.0.2.0/24")},
	{name: "a4all", key: "ipv4_addr", interval: true, elems: et("0.0.0.0/0")},
	{name: "a6", key: "ipv6_addr", elems: et("fd00::1", "::1")},
	{name: "a6i", key: "ipv6_addr", interval: true, elems: et("fd00::/64", "::1", "fd01::1-fd01::ff"), want: et("::1", "fd00::/64", "fd01::1-fd01::ff")},
	{name: "p", key: "inet_proto", elems: et("tcp", "udp", "ipv6-icmp", "icmp")},
	{name: "sv", key: "inet_service", elems: et("22", "80", "443")},
	{name: "svi", key: "inet_service", interval: true, elems: et("80-90", "443", "0-1023"[:0]+"1024-2047"), want: et("80-90", "443", "1024-2047")},
	{name: "ifn", key: "ifname", elems: et(`"eth0"`, `"lo"`)},
	{name: "ifni", key: "ifname", interval: true, elems: et(`"eth0"`, `"veth*"`)},
	{name: "mk", key: "mark", elems: et("0x00000001", "0x00008000")},
	{name: "mki", key: "mark", interval: true, elems: et("0x00000100", "0x00000000", "0x12345678", "0xffffffff"),
		want: et("0x00000000", "0x00000100", "0x12345678", "0xffffffff")},
	{name: "cmi", key: "ipv4_addr . mark", interval: true, elems: et("10.0.0.0/8 . 0x00000100", "1.2.3.4 . 0x12345678")},
	{name: "pn", key: "inet_proto", elems: et("ip", "ipencap", "dccp", "255")},
	{name: "pi", key: "inet_proto", interval: true, elems: et("0-5", "tcp", "dccp", "250-255"), want: et("0-5", "tcp", "dccp", "250-255")},
	{name: "c3", key: "ipv4_addr . inet_proto . inet_service", elems: et("10.0.0.1 . tcp . 80", "10.0.0.2 . udp . 53")},
	{name: "c3i", key: "ipv4_addr . inet_proto . inet_service", interval: true, elems: et("10.0.0.0/8 . tcp . 80-90", "1.1.1.1 . udp . 53")},
	{name: "c2", key: "inet_proto . inet_service", elems: et("tcp . 80", "udp . 53")},
	{name: "c6", key: "ipv6_addr . inet_service", elems: et("fd00::1 . 80", "::1 . 53")},
	{name: "vm4", key: "ipv4_addr", data: "verdict", elems: []ElementText{{"10.0.0.1", "accept"}, {"10.0.0.2", "jump a"}, {"10.0.0.3", "drop"}, {"10.0.0.4", "goto a"}}},
	{name: "vm4i", key: "ipv4_addr", data: "verdict", interval: true, elems: []ElementText{{"10.0.0.0/8", "accept"}, {"11.0.0.1", "jump a"}}},
	{name: "vm3", key: "ipv4_addr . inet_proto . inet_service", data: "verdict", elems: []ElementText{{"10.0.0.1 . tcp . 80", "jump a"}, {"10.0.0.1 . udp . 53", "drop"}}},
	{name: "vm3i", key: "ipv4_addr . inet_proto . inet_service", data: "verdict", interval: true, elems: []ElementText{{"10.0.0.0/24 . tcp . 80", "jump a"}, {"10.0.1.1 . udp . 1-1024", "drop"}}},
	{name: "am", key: "ipv4_addr", data: "ipv4_addr", elems: []ElementText{{"10.0.0.1", "192.0.2.1"}, {"10.0.0.2", "192.0.2.2"}}},
	{name: "am6", key: "ipv6_addr", data: "ipv6_addr", elems: []ElementText{{"fd00::1", "2001:db8::1"}}},
	{name: "mkv", key: "mark", data: "verdict", elems: []ElementText{{"0x00000010", "drop"}}},
}
