package doctor

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"

	"github.com/nftguard/nftguard/engine/nftwire"
)

// describe is the fallback for rules the engine's renderer cannot print
// (other families, unknown expressions, named sets): nft-like words for the common iptables-nft
// patterns (addresses, verdicts, xt extensions), the expression name for
// the rest.
func describe(family string, exprs []Expr) string {
	var out []string
	var pending string // a loaded field waiting for its comparison
	flush := func() {
		if pending != "" {
			out = append(out, pending)
			pending = ""
		}
	}
	for _, e := range exprs {
		switch v := e.Value.(type) {
		case *nftwire.Payload:
			flush()
			pending = payloadField(family, v)
		case *nftwire.Meta:
			flush()
			pending = "meta " + metaKey(v.Key)
		case *nftwire.Ct:
			flush()
			pending = fmt.Sprintf("ct key %d", v.Key)
		case *nftwire.Cmp:
			op := ""
			if v.Op != nftwire.CmpOpEq {
				op = cmpOps[v.Op] + " "
			} else if strings.Contains(pending, " & ") {
				op = "== "
			}
			if pending == "" {
				pending = "(register)"
			}
			out = append(out, pending+" "+op+dataText(pending, v.Data))
			pending = ""
		case *nftwire.Bitwise:
			if pending != "" {
				pending += " & " + dataText(pending, v.Mask)
			}
		case *nftwire.Lookup:
			neg := ""
			if v.Invert {
				neg = "!= "
			}
			if pending == "" {
				pending = "(register)"
			}
			out = append(out, pending+" "+neg+"@"+v.SetName)
			pending = ""
		case *nftwire.Counter:
			flush()
			out = append(out, "counter")
		case *nftwire.Verdict:
			flush()
			out = append(out, verdictText(v))
		case *nftwire.Match:
			flush()
			out = append(out, fmt.Sprintf("xt match %q rev %d", v.Name, v.Rev))
		case *nftwire.Target:
			flush()
			out = append(out, fmt.Sprintf("xt target %q rev %d", v.Name, v.Rev))
		default:
			// Unknown to this describer: the name stands for the value
			// it may load for a following comparison.
			flush()
			pending = e.Name
		}
	}
	flush()
	return strings.Join(out, " ")
}

var cmpOps = map[nftwire.CmpOp]string{nftwire.CmpOpNeq: "!=", nftwire.CmpOpLt: "<", nftwire.CmpOpLte: "<=", nftwire.CmpOpGt: ">", nftwire.CmpOpGte: ">="}

func payloadField(family string, p *nftwire.Payload) string {
	if p.Base == nftwire.PayloadBaseNetworkHeader {
		switch {
		case family != "ip6" && p.Offset == 12 && p.Len == 4:
			return "ip saddr"
		case family != "ip6" && p.Offset == 16 && p.Len == 4:
			return "ip daddr"
		case family != "ip6" && p.Offset == 9 && p.Len == 1:
			return "ip protocol"
		case family == "ip6" && p.Offset == 8 && p.Len == 16:
			return "ip6 saddr"
		case family == "ip6" && p.Offset == 24 && p.Len == 16:
			return "ip6 daddr"
		}
	}
	if p.Base == nftwire.PayloadBaseTransportHeader && p.Len == 2 {
		switch p.Offset {
		case 0:
			return "th sport"
		case 2:
			return "th dport"
		}
	}
	return fmt.Sprintf("payload base %d offset %d len %d", p.Base, p.Offset, p.Len)
}

func metaKey(k nftwire.MetaKey) string {
	switch k {
	case nftwire.MetaKeyMARK:
		return "mark"
	case nftwire.MetaKeyIIFNAME:
		return "iifname"
	case nftwire.MetaKeyOIFNAME:
		return "oifname"
	case nftwire.MetaKeyL4PROTO:
		return "l4proto"
	case nftwire.MetaKeyNFPROTO:
		return "nfproto"
	}
	return fmt.Sprintf("key %d", k)
}

func dataText(field string, b []byte) string {
	if strings.HasPrefix(field, "meta mark") && len(b) == 4 {
		// The mark is loaded in host byte order.
		return fmt.Sprintf("0x%x", binary.NativeEndian.Uint32(b))
	}
	if strings.HasSuffix(field, "addr") {
		if a, ok := netip.AddrFromSlice(b); ok {
			return a.String()
		}
	}
	if strings.HasSuffix(field, "name") {
		return fmt.Sprintf("%q", strings.TrimRight(string(b), "\x00"))
	}
	if len(b) <= 2 && strings.HasSuffix(field, "port") {
		n := 0
		for _, c := range b {
			n = n<<8 | int(c)
		}
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("0x%x", b)
}

func verdictText(v *nftwire.Verdict) string {
	switch v.Kind {
	case nftwire.VerdictAccept:
		return "accept"
	case nftwire.VerdictDrop:
		return "drop"
	case nftwire.VerdictReturn:
		return "return"
	case nftwire.VerdictContinue:
		return "continue"
	case nftwire.VerdictJump:
		return "jump " + v.Chain
	case nftwire.VerdictGoto:
		return "goto " + v.Chain
	case nftwire.VerdictQueue:
		return "queue"
	}
	return fmt.Sprintf("verdict %d", v.Kind)
}
