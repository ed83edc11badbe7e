package nftsyntax

import "strings"

// testSetDecls are the named sets and maps the test rules refer to, as nft
// declarations; testSets resolves them for the compiler.
var testSetDecls = []struct {
	name, key, data   string
	interval, timeout bool
}{
	{"s4", "ipv4_addr", "", true, false},
	{"s6", "ipv6_addr", "", true, false},
	{"ps", "inet_service", "", false, false},
	{"c3", "ipv4_addr . inet_proto . inet_service", "", false, false},
	{"vm", "ipv4_addr . inet_proto . inet_service", "verdict", false, false},
	{"vm4", "ipv4_addr", "verdict", false, false},
	{"am", "ipv4_addr", "ipv4_addr", false, false},
	{"am6", "ipv6_addr", "ipv6_addr", false, false},
	{"ifs", "ifname", "", false, false},
	{"mk", "mark", "", false, false},
	{"mkv", "mark", "verdict", false, false},
	// Interval sets keyed by mark: nft stores their keys in network order
	// and converts the loaded mark (byteorder hton) before the lookup.
	{"mki", "mark", "", true, false},
	{"mkvi", "mark", "verdict", true, false},
	{"cmi", "ipv4_addr . mark", "", true, false},
	{"cm", "ipv4_addr . mark", "", false, false},
	{"ammi", "mark", "ipv4_addr", true, false},
	// The DNS forwarder's sets: which pods ask, the answers' addresses,
	// and a timeout set of protocols.
	{"subj4", "ipv4_addr", "", false, false},
	{"dns4", "ipv4_addr", "", false, false},
	{"alive", "inet_proto", "", false, true},
}

type mapSets map[string]SetDecl

func (m mapSets) LookupSet(name string) (SetDecl, bool) { d, ok := m[name]; return d, ok }

func testSets() mapSets {
	m := mapSets{}
	for _, s := range testSetDecls {
		d, err := ParseSetDecl(s.name, s.key, s.data, s.interval)
		if err != nil {
			panic(err)
		}
		d.Timeout = s.timeout
		m[s.name] = d
	}
	return m
}

// ruleCase is a rule as written and as `nft list` prints it back.
type ruleCase struct{ in, want string }

func rc(in string, want ...string) ruleCase {
	if len(want) > 0 {
		return ruleCase{in, want[0]}
	}
	return ruleCase{in, in}
}

// matchCases are every supported match with each operand form.
var matchCases = []ruleCase{
	rc("ip saddr 10.0.0.1"), rc("ip daddr 10.0.0.1"), rc("ip saddr 10.0.0.0/8"), rc("ip saddr 10.16.0.0/12"),
	rc("ip saddr 10.0.0.1/32", "ip saddr 10.0.0.1"),
	rc("ip saddr 10.0.0.1-10.0.0.9"), rc("ip saddr { 10.0.0.1, 10.0.0.2 }"), rc("ip saddr { 10.0.0.1 }", "ip saddr 10.0.0.1"),
	rc("ip saddr { 10.0.0.0/8, 192.168.1.1, 172.16.0.1-172.16.0.9 }", "ip saddr { 10.0.0.0/8, 172.16.0.1-172.16.0.9, 192.168.1.1 }"),
	rc("ip saddr @s4"), rc("ip saddr != @s4"), rc("ip saddr != 10.0.0.1"), rc("ip saddr != 10.0.0.0/8"),
	rc("ip saddr != 10.0.0.1-10.0.0.9"), rc("ip saddr != { 10.0.0.1, 10.0.0.2 }"), rc("ip daddr == 10.0.0.1", "ip daddr 10.0.0.1"),
	rc("ip6 saddr fd00::1"), rc("ip6 daddr fd00::/64"), rc("ip6 daddr fd00::/60"), rc("ip6 saddr ::1"), rc("ip6 saddr != fd00::1"),
	rc("ip6 saddr fd00::1-fd00::9"), rc("ip6 daddr { fd00::1, fd00::2 }"), rc("ip6 daddr @s6"), rc("ip6 daddr != @s6"),
	rc("tcp dport 80"), rc("tcp sport 80"), rc("udp dport 53"), rc("udp sport 53"), rc("sctp dport 80"), rc("sctp sport 80"),
	rc("tcp dport 80-90"), rc("tcp dport != 80-90"), rc("tcp dport { 80, 443 }"), rc("tcp dport { 80 }", "tcp dport 80"),
	rc("tcp dport { 80, 1000-2000 }"), rc("tcp dport != 80"), rc("tcp dport != { 80, 443 }"), rc("tcp dport @ps"), rc("tcp dport != @ps"),
	rc("udp dport { 53, 5353 }"), rc("th dport 53"), rc("th sport 53"), rc("th dport 1-1024"), rc("th dport { 53, 80 }"), rc("th dport @ps"),
	rc("meta l4proto tcp"), rc("meta l4proto udp"), rc("meta l4proto icmp"), rc("meta l4proto ipv6-icmp"), rc("meta l4proto icmpv6", "meta l4proto ipv6-icmp"),
	rc("meta l4proto { tcp, udp }"), rc("meta l4proto != tcp"), rc("ip protocol tcp"), rc("ip protocol { tcp, udp }"), rc("ip6 nexthdr udp"),
	rc("meta nfproto ipv4"), rc("meta nfproto ipv6"),
	// Neighbour discovery as the policy accepts it (single values only).
	rc("icmpv6 type nd-neighbor-solicit"), rc("icmpv6 type 136", "icmpv6 type nd-neighbor-advert"), rc("icmpv6 type 132", "icmpv6 type mld-listener-done"),
	rc("icmpv6 type != echo-request"), rc("icmpv6 type 200"), rc("ip6 hoplimit 255"), rc("ip6 hoplimit != 255"),
	rc("icmpv6 type nd-neighbor-solicit ip6 hoplimit 255"), rc("ip6 hoplimit 255 icmpv6 type nd-neighbor-advert"),
	rc("ip6 saddr fe80::/10 icmpv6 type nd-router-advert ip6 hoplimit 255"),
	// Protocol names from /etc/protocols (netbase 6.4); ranges print as numbers.
	rc("meta l4proto dccp"), rc("meta l4proto 33", "meta l4proto dccp"), rc("meta l4proto ip"), rc("meta l4proto hopopt", "meta l4proto ip"),
	rc("meta l4proto 4", "meta l4proto ipencap"), rc("meta l4proto 255"), rc("meta l4proto 7"), rc("meta l4proto IPv6-ICMP", "meta l4proto ipv6-icmp"),
	rc("meta l4proto CPHB", "meta l4proto rspf"), rc("ip protocol ax.25"), rc("ip6 nexthdr mobility-header"), rc("meta l4proto != dccp"),
	rc("meta l4proto { 0, 4, 33, 255 }", "meta l4proto { ip, ipencap, dccp, 255 }"), rc("meta l4proto { 0-5, dccp }"),
	rc("meta l4proto 0-5"), rc("meta l4proto 6-17"), rc("meta l4proto != 33-34"),
	rc("meta l4proto . th dport { dccp . 80, 4 . 1 }", "meta l4proto . th dport { dccp . 80, ipencap . 1 }"),
	rc(`iifname "eth0"`), rc(`oifname "eth0"`), rc(`meta iifname "eth0"`, `iifname "eth0"`), rc(`meta oifname "veth*"`, `oifname "veth*"`),
	rc(`iifname "veth*"`), rc(`iifname != "eth0"`), rc(`iifname { "eth0", "lo" }`), rc(`iifname @ifs`),
	rc("meta mark 0x00000001"), rc("meta mark 0x1", "meta mark 0x00000001"), rc("meta mark != 0x00000001"),
	rc("meta mark & 0x8000 == 0x8000", "meta mark & 0x00008000 == 0x00008000"), rc("meta mark & 0x00008000 != 0x00000000"),
	rc("meta mark { 0x1, 0x2 }", "meta mark { 0x00000001, 0x00000002 }"), rc("meta mark @mk"),
	rc("meta mark @mki"), rc("meta mark != @mki"), rc("ct mark @mki"), rc("ip saddr . meta mark @cmi"), rc("ip saddr . meta mark @cm"),
	rc("meta mark . ip saddr { 0x100 . 10.0.0.0/8, 0x12345678 . 10.0.0.1 }", "meta mark . ip saddr { 0x00000100 . 10.0.0.0/8, 0x12345678 . 10.0.0.1 }"),
	rc("ip saddr . meta mark { 10.0.0.0/8 . 0x100, 10.0.0.1 . 0x12345678 }", "ip saddr . meta mark { 10.0.0.0/8 . 0x00000100, 10.0.0.1 . 0x12345678 }"),
	rc("ct state established,related"), rc("ct state related,established", "ct state established,related"), rc("ct state invalid"),
	rc("ct state new"), rc("ct state untracked"), rc("ct mark 0x00000010"), rc("ct mark & 0x0000ff00 == 0x00000100"),
	rc("ip daddr . meta l4proto . th dport @c3"), rc("ip daddr . meta l4proto . th dport != @c3"),
	rc("meta l4proto . th dport { tcp . 80, udp . 53 }"), rc("ip daddr . tcp dport { 10.0.0.1 . 80, 10.0.0.2 . 443 }"),
	rc("ip saddr . ip daddr { 10.0.0.1 . 10.0.0.2, 10.0.0.3 . 10.0.0.4 }"), rc("ip6 saddr . tcp dport { fd00::1 . 22, fd00::2 . 80 }"),
	rc("ip daddr . tcp dport { 10.0.0.0/8 . 80-90, 1.1.1.1 . 22 }"),
}

// vmapCases end a rule themselves (the map supplies the verdict).
var vmapCases = []ruleCase{
	rc("ip daddr . meta l4proto . th dport vmap @vm"),
	rc("ip saddr vmap { 10.0.0.1 : jump a, 10.0.0.2 : drop }"),
	rc("ip saddr vmap @vm4"), rc("meta mark vmap @mkv"), rc("meta mark vmap @mkvi"), rc("meta l4proto vmap { dccp : accept, 0 : drop }", "meta l4proto vmap { dccp : accept, ip : drop }"),
	rc("ip saddr vmap { 10.0.0.0/8 : accept, 192.168.0.0/16 : goto a }"),
	rc("tcp dport vmap { 22 : accept, 80 : drop }"),
	rc("meta l4proto . th dport vmap { tcp . 80 : accept, udp . 53 : drop }"),
	rc("ip6 saddr vmap { fd00::1 : accept, fd00::2 : drop }"),
	rc("ip saddr vmap { 10.0.0.1 : accept }"),
}

// tailCases are statements and verdicts that end a match.
var tailCases = []ruleCase{
	rc("accept"), rc("drop"), rc("jump a"), rc("goto a"), rc("return"), rc("continue"),
	rc("counter", "counter packets 0 bytes 0"), rc("counter accept", "counter packets 0 bytes 0 accept"),
	rc(`log prefix "x " group 2 drop`), rc(`log prefix "nftguard: " accept`), rc("log group 1"), rc("log"),
	rc("limit rate 10/second accept"), rc("limit rate 10/second burst 20 packets accept"), rc("limit rate over 5/minute drop"),
	rc("meta mark set 0x1", "meta mark set 0x00000001"), rc("reject"), rc(`accept comment "hello world"`),
}

// standaloneCases are whole rules.
var standaloneCases = []ruleCase{
	// dnat: to an address, or to an address and a port after a
	// transport protocol match.
	rc("dnat ip to 10.0.0.1"), rc("dnat ip6 to fd00::1"), rc("dnat ip6 to [fd00::1]", "dnat ip6 to fd00::1"),
	rc("meta nfproto ipv4 dnat ip to 10.0.0.1"), rc("ip daddr 10.96.0.10 dnat ip to 10.0.0.1"),
	rc("meta l4proto { tcp, udp } th dport 53 dnat ip to 10.0.0.1:5353"),
	rc("meta l4proto { tcp, udp } dnat ip to 10.0.0.1:53"),
	rc("meta l4proto { tcp, udp } th dport 53 dnat ip6 to [fd00::1]:5353"),
	rc("meta l4proto udp dnat ip6 to [fd00::1]:5353"), rc("meta l4proto tcp dnat ip to 10.0.0.1:0"),
	rc("udp dport 53 dnat ip to 10.0.0.1:65535"), rc("tcp dport != 53 dnat ip to 10.0.0.1:53"),
	rc("ip protocol udp dnat ip to 10.0.0.1:53"), rc("ip6 nexthdr udp dnat ip6 to [fd00::1]:53"),
	rc("meta l4proto { tcp, udp } th dport 53 ip saddr @subj4 ip daddr @dns4 meta l4proto @alive dnat ip to 10.0.0.1:5353"),
	rc("meta l4proto { tcp, udp } th dport 53 ip saddr @subj4 ip daddr @dns4 meta l4proto @alive counter dnat ip to 10.0.0.1:5353",
		"meta l4proto { tcp, udp } th dport 53 ip saddr @subj4 ip daddr @dns4 meta l4proto @alive counter packets 0 bytes 0 dnat ip to 10.0.0.1:5353"),
	rc("reject"), rc("reject with icmp type port-unreachable", "reject with icmp port-unreachable"),
	rc("reject with icmp admin-prohibited"), rc("reject with icmp host-unreachable"), rc("reject with icmp net-prohibited"),
	rc("reject with icmpx type admin-prohibited", "reject with icmpx admin-prohibited"), rc("reject with icmpx no-route"),
	rc("reject with icmpx port-unreachable", "reject"), rc("reject with icmpv6 type admin-prohibited", "reject with icmpv6 admin-prohibited"),
	rc("reject with icmpv6 port-unreachable"), rc("reject with tcp reset", "meta l4proto tcp reject with tcp reset"),
	rc("tcp dport 80 reject with tcp reset"), rc("ip saddr 10.0.0.1 reject with icmp port-unreachable"),
	rc("ip6 saddr fd00::1 reject with icmpv6 admin-prohibited"),
	rc("snat ip to 192.0.2.1"), rc("snat ip6 to fd00::1"), rc("snat ip to ip saddr map @am"), rc("snat ip6 to ip6 saddr map @am6"),
	rc("snat ip to meta mark map @ammi"),
	// NFLOG logging of denied packets: a rate-limited log, with a prefix,
	// to a group, before or without a verdict.
	rc(`log prefix "nftguard deny: "`), rc("log group 100"), rc(`log prefix "p" group 7 drop`),
	rc(`limit rate 10/second burst 20 packets log prefix "nftguard: denied " group 100`),
	rc(`limit rate 10/second burst 20 packets log prefix "nftguard: denied " group 100 drop`),
	rc(`limit rate 10/second burst 20 packets log prefix "denied " drop`), rc("limit rate 10/second burst 20 packets log group 100"),
	rc(`ip saddr 10.0.0.1 limit rate 10/second burst 20 packets log prefix "deny " group 100 drop`),
	rc("ip saddr 10.0.0.0/8 snat ip to 192.0.2.1"), rc("ip saddr @s4 masquerade"), rc("masquerade"), rc("notrack"),
	rc("meta l4proto tcp tcp dport 80 accept", "tcp dport 80 accept"), rc("meta nfproto ipv4 ip saddr 10.0.0.1 accept", "ip saddr 10.0.0.1 accept"),
	rc("meta l4proto tcp th dport 80 accept", "tcp dport 80 accept"),
	rc("ip saddr 10.0.0.1 ip daddr 10.0.0.2 tcp dport 80 ct state new counter accept", "ip saddr 10.0.0.1 ip daddr 10.0.0.2 tcp dport 80 ct state new counter packets 0 bytes 0 accept"),
	rc(`iifname "veth*" oifname "eth0" meta mark & 0x8000 == 0x8000 accept comment "pod egress"`, `iifname "veth*" oifname "eth0" meta mark & 0x00008000 == 0x00008000 accept comment "pod egress"`),
	rc("accept"), rc(`drop comment "plain comment"`),
}

// allRuleCases combines every match with every tail, plus vmaps and
// standalone rules.
func allRuleCases() []ruleCase {
	var out []ruleCase
	for _, m := range matchCases {
		for _, t := range tailCases {
			want := m.want + " " + t.want
			if t.in == "reject" {
				// After an address-family match nft picks that family's
				// ICMP and lists it explicitly.
				switch {
				case m.in == "meta nfproto ipv4":
					want = "reject with icmp port-unreachable"
				case m.in == "meta nfproto ipv6":
					want = "reject with icmpv6 port-unreachable"
				case strings.HasPrefix(m.in, "ip6 ") || strings.Contains(m.in, ". ip6 ") || strings.HasPrefix(m.in, "icmpv6 "):
					want += " with icmpv6 port-unreachable"
				case strings.HasPrefix(m.in, "ip ") || strings.Contains(m.in, ". ip "):
					want += " with icmp port-unreachable"
				}
			}
			out = append(out, ruleCase{m.in + " " + t.in, want})
		}
	}
	for _, v := range vmapCases {
		out = append(out, v)
		out = append(out, ruleCase{"counter " + v.in, "counter packets 0 bytes 0 " + v.want})
		out = append(out, ruleCase{v.in + ` comment "m"`, v.want + ` comment "m"`})
	}
	out = append(out, standaloneCases...)
	return out
}
