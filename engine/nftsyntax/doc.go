// Grammar of the supported subset (a rule is one line; blanks around
// " . ", " : " and operators are required as nft prints them):
//
//	rule      = { stmt } [ "comment" STRING ]
//	stmt      = match | vmap | "meta mark set" MARK | counter | log | limit
//	          | reject | snat | dnat | "masquerade" | "notrack" | verdict
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
//	dnat      = "dnat" "ip" "to" IPV4 [ ":" PORT ] | "dnat" "ip6" "to" ( IPV6 | "[" IPV6 "]" [ ":" PORT ] )
//	            (a PORT, a number, only after a transport protocol match:
//	            a tcp/udp/sctp field, or meta l4proto, ip protocol or
//	            ip6 nexthdr equal to a value or { set }, as nft demands)
//	verdict   = "accept" | "drop" | "return" | "continue" | ( "jump" | "goto" ) CHAIN
//
// Examples:
//
//	ct state established,related accept
//	ip daddr . meta l4proto . th dport vmap @svc
//	ip saddr vmap { 10.0.0.1 : jump pod-a, 10.0.0.2 : drop }
//	iifname "veth*" meta mark & 0x8000 == 0x8000 counter accept comment "egress"
//	ip saddr @cluster snat ip to ip saddr map @egress
//	meta l4proto { tcp, udp } th dport 53 ip saddr @subj4 dnat ip to 10.0.0.1:5353
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
//
// # Where things are
//
//	types.go          Family, DataType, Type, SetDecl, Compiled: the
//	                  package's vocabulary (and its overview comment)
//	lexer.go          rule text to tokens; SyntaxError
//	parser.go         tokens to a ruleAST, refusing anything outside the
//	                  subset above
//	ast.go            the ruleAST and its statements, printed as nft prints
//	                  them
//	compile.go        CompileRule: a ruleAST to the expressions nft emits,
//	                  protocol dependencies included
//	render.go         RenderRule: expressions back to rule text
//	fields.go         the selectors (ip saddr, th dport, meta mark, ...):
//	                  their loads and data types
//	datatypes.go      the data types nft knows, with nft's ids; ParseType
//	elements.go       element text to kernel elements and back
//	                  (EncodeElements, DecodeElements), ParseSetDecl
//	plain.go          the fast path of EncodeElements for sets without
//	                  intervals
//	userdata.go       set and rule user data as nft writes it, ClipComment
//	strings.go        CheckName, CheckComment: what nft reads back unchanged
//	protocols.go      /etc/protocols as nft 1.0.6 prints it (generated)
//	gen_protocols.go  the generator of protocols.go (go:build ignore)
//	util.go           maskBytes: a prefix as a byte mask
package nftsyntax
