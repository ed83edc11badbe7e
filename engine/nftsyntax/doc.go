// Grammar of the supported subset (a rule is one line; blanks around
// " . ", " : " and operators are required as nft prints them):
//
//	rule      = { stmt } [ "comment" STRING ]
//	stmt      = match | vmap | "meta mark set" MARK | counter | log | limit
//	          | reject | snat | "masquerade" | "notrack" | verdict
//	match     = key [ "&" MARK ( "==" | "!=" ) ] [ "==" | "!=" ] operand
//	          | "ct state" STATE { "," STATE }
//	key       = selector { "." selector }
//	selector  = ( "ip" | "ip6" ) ( "saddr" | "daddr" ) | "ip protocol" | "ip6 nexthdr"
//	          | ( "tcp" | "udp" | "sctp" | "th" ) ( "sport" | "dport" )
//	          | "meta" ( "l4proto" | "nfproto" | "mark" | "iifname" | "oifname" )
//	          | "iifname" | "oifname" | "ct mark"
//	          | "ip6 hoplimit" | "icmpv6 type"        (single values only)
//	operand   = VALUE | PREFIX | RANGE | "{" elem { "," elem } "}" | "@" NAME
//	vmap      = key "vmap" ( "@" NAME | "{" elem ":" verdict { "," ... } "}" )
//	counter   = "counter" [ "packets" N "bytes" N ]
//	log       = "log" [ "prefix" STRING ] [ "group" N ]
//	limit     = "limit rate" [ "over" ] N "/" UNIT [ "burst" N "packets" ]
//	reject    = "reject" [ "with" ( ( "icmp" | "icmpv6" | "icmpx" ) [ "type" ] NAME | "tcp reset" ) ]
//	snat      = "snat" ( "ip" | "ip6" ) "to" ( ADDRESS | key "map @" NAME )
//	verdict   = "accept" | "drop" | "return" | "continue" | ( "jump" | "goto" ) CHAIN
//
// Examples:
//
//	ct state established,related accept
//	ip daddr . meta l4proto . th dport vmap @svc
//	ip saddr vmap { 10.0.0.1 : jump pod-a, 10.0.0.2 : drop }
//	iifname "veth*" meta mark & 0x8000 == 0x8000 counter accept comment "egress"
//	ip saddr @cluster snat ip to ip saddr map @egress
//
// Like nft, the compiler adds protocol dependencies (`meta nfproto ipv4`
// before `ip saddr`, `meta l4proto tcp` before `tcp dport`) once per rule,
// turns a one-element anonymous set into a comparison, a byte-aligned
// prefix into a shorter load, and a positive range into two comparisons.
// It also converts a mark to network order (a byteorder expression) before
// looking it up in an interval set, whose mark keys nft stores big-endian.
// inet_proto values print as the names of Debian 12's /etc/protocols
// (compiled in, see protocols.go), and ranges print as numbers, as nft does.
// Only inet tables are supported.
package nftsyntax
