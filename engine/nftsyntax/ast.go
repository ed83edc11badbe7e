package nftsyntax

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/nftguard/nftguard/engine/nftwire"
)

// ruleAST is a parsed rule: the compiler's input and the renderer's output.
type ruleAST struct {
	stmts []stmt
	// The statements of a typical rule, allocated with it (within 512
	// bytes, the largest size the Go allocator serves without a per-object
	// type header).
	stmtBuf    [4]stmt
	matchBuf   [2]matchStmt
	nMatch     int
	comment    string
	hasComment bool
}

// stmt is one statement; String is its canonical text as nft lists it.
type stmt interface {
	String() string
}

type operandKind int

const (
	opValue operandKind = iota
	opPrefix
	opRange
	opSet
	opNamedSet
	opFlags
)

// operand is the right-hand side of a match.
type operand struct {
	kind     operandKind
	val, hi  []byte // value; range low/high; prefix network (full length)
	bits     int    // prefix length
	wildcard bool   // ifname prefix match, val holds only the prefix bytes
	elems    []ElementText
	name     string
	flags    uint32
}

// matchStmt compares a selector (or a concatenation) with an operand.
type matchStmt struct {
	fields   []*field
	fieldBuf [2]*field // fields of a typical match, allocated with it
	neq      bool
	mask     []byte // `meta mark & MASK == VALUE`
	rhs      operand
}

// vmapStmt looks a selector up in a verdict map, anonymous or named.
type vmapStmt struct {
	fields []*field
	elems  []ElementText
	name   string
}

type markSetStmt struct{ val []byte }

type counterStmt struct{ packets, bytes uint64 }

type logStmt struct {
	prefix    string
	hasPrefix bool
	group     uint16
	hasGroup  bool
}

type limitStmt struct {
	rate     uint64
	unit     nftwire.LimitTime
	burst    uint32
	over     bool
	hasBurst bool
}

// rejectStmt: kind is "" (plain reject), "icmp", "icmpv6", "icmpx" or "tcp".
type rejectStmt struct {
	kind string
	code byte
}

// natStmt is snat (to an address or through a map) or dnat (to an
// address, with a port when the rule matched a transport protocol).
type natStmt struct {
	dnat      bool
	nfproto   byte
	addr      []byte
	port      []byte // dnat only; nil: none, else 2 bytes network order
	mapFields []*field
	mapName   string
}

type masqStmt struct{}

type notrackStmt struct{}

type verdictStmt struct {
	kind  nftwire.VerdictKind
	chain string
}

func fieldsText(fs []*field) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.name
	}
	return strings.Join(names, " . ")
}

func (r *ruleAST) String() string {
	parts := make([]string, 0, len(r.stmts)+1)
	for _, s := range r.stmts {
		parts = append(parts, s.String())
	}
	if r.hasComment {
		parts = append(parts, "comment "+quote(r.comment))
	}
	return strings.Join(parts, " ")
}

func (m *matchStmt) String() string {
	var b strings.Builder
	b.WriteString(fieldsText(m.fields))
	dt := m.fields[0].dt
	if m.mask != nil {
		mask, _ := formatValue(dt, m.mask)
		fmt.Fprintf(&b, " & %s", mask)
		if m.neq {
			b.WriteString(" !=")
		} else {
			b.WriteString(" ==")
		}
	} else if m.neq && m.rhs.kind == opFlags {
		b.WriteString(" !") // nft lists a negated bitmask match this way
	} else if m.neq {
		b.WriteString(" !=")
	}
	b.WriteString(" ")
	b.WriteString(m.rhs.text(dt))
	return b.String()
}

func (o *operand) text(dt DataType) string {
	switch o.kind {
	case opValue:
		if o.wildcard {
			return quote(string(o.val) + "*")
		}
		s, _ := formatValue(dt, o.val)
		return s
	case opPrefix:
		s, _ := formatValue(dt, o.val)
		return fmt.Sprintf("%s/%d", s, o.bits)
	case opRange:
		lo, _ := formatRangeEnd(dt, o.val)
		hi, _ := formatRangeEnd(dt, o.hi)
		return lo + "-" + hi
	case opSet:
		keys := make([]string, len(o.elems))
		for i, e := range o.elems {
			keys[i] = e.Key
		}
		return "{ " + strings.Join(keys, ", ") + " }"
	case opNamedSet:
		return "@" + o.name
	case opFlags:
		var names []string
		for _, s := range ctStateBits {
			if o.flags&s.bit != 0 {
				names = append(names, s.name)
			}
		}
		return strings.Join(names, ",")
	}
	return "?"
}

func (v *vmapStmt) String() string {
	if v.name != "" {
		return fieldsText(v.fields) + " vmap @" + v.name
	}
	items := make([]string, len(v.elems))
	for i, e := range v.elems {
		items[i] = e.Key + " : " + e.Value
	}
	return fieldsText(v.fields) + " vmap { " + strings.Join(items, ", ") + " }"
}

func (m *markSetStmt) String() string {
	s, _ := formatValue(TypeMark, m.val)
	return "meta mark set " + s
}

func (c *counterStmt) String() string {
	return fmt.Sprintf("counter packets %d bytes %d", c.packets, c.bytes)
}

func (l *logStmt) String() string {
	s := "log"
	if l.hasPrefix {
		s += " prefix " + quote(l.prefix)
	}
	if l.hasGroup {
		s += fmt.Sprintf(" group %d", l.group)
	}
	return s
}

var limitUnits = []struct {
	unit nftwire.LimitTime
	name string
}{
	{nftwire.LimitTimeSecond, "second"}, {nftwire.LimitTimeMinute, "minute"}, {nftwire.LimitTimeHour, "hour"},
	{nftwire.LimitTimeDay, "day"}, {nftwire.LimitTimeWeek, "week"},
}

// defaultBurst is the burst nft sends when the rule names none; nft omits
// it again when listing.
const defaultBurst = 5

func (l *limitStmt) String() string {
	unit := "?"
	for _, u := range limitUnits {
		if u.unit == l.unit {
			unit = u.name
		}
	}
	s := "limit rate "
	if l.over {
		s += "over "
	}
	s += fmt.Sprintf("%d/%s", l.rate, unit)
	if l.burst != defaultBurst {
		s += fmt.Sprintf(" burst %d packets", l.burst)
	}
	return s
}

func (r *rejectStmt) String() string {
	switch r.kind {
	case "":
		return "reject"
	case "tcp":
		return "reject with tcp reset"
	}
	for _, c := range rejectCodes[r.kind] {
		if c.code == r.code {
			return "reject with " + r.kind + " " + c.name
		}
	}
	return fmt.Sprintf("reject with %s %d", r.kind, r.code)
}

// rejectCodes are the ICMP codes nft names, per reject family.
var rejectCodes = map[string][]struct {
	code byte
	name string
}{
	"icmp": {{0, "net-unreachable"}, {1, "host-unreachable"}, {2, "prot-unreachable"}, {3, "port-unreachable"},
		{9, "net-prohibited"}, {10, "host-prohibited"}, {13, "admin-prohibited"}},
	"icmpv6": {{0, "no-route"}, {1, "admin-prohibited"}, {3, "addr-unreachable"}, {4, "port-unreachable"},
		{5, "policy-fail"}, {6, "reject-route"}},
	"icmpx": {{0, "no-route"}, {1, "port-unreachable"}, {2, "host-unreachable"}, {3, "admin-prohibited"}},
}

func (s *natStmt) String() string {
	verb := "snat"
	if s.dnat {
		verb = "dnat"
	}
	fam := "ip"
	dt := TypeIPv4Addr
	if s.nfproto == nfprotoIPv6 {
		fam, dt = "ip6", TypeIPv6Addr
	}
	if s.mapName != "" {
		return fmt.Sprintf("%s %s to %s map @%s", verb, fam, fieldsText(s.mapFields), s.mapName)
	}
	a, _ := formatValue(dt, s.addr)
	if s.port != nil {
		// As nft prints it: an IPv6 address in brackets before a port.
		if s.nfproto == nfprotoIPv6 {
			a = "[" + a + "]"
		}
		return fmt.Sprintf("%s %s to %s:%d", verb, fam, a, binary.BigEndian.Uint16(s.port))
	}
	return fmt.Sprintf("%s %s to %s", verb, fam, a)
}

func (masqStmt) String() string    { return "masquerade" }
func (notrackStmt) String() string { return "notrack" }

var verdictNames = map[nftwire.VerdictKind]string{
	nftwire.VerdictAccept: "accept", nftwire.VerdictDrop: "drop", nftwire.VerdictReturn: "return",
	nftwire.VerdictContinue: "continue", nftwire.VerdictJump: "jump", nftwire.VerdictGoto: "goto",
}

func (v *verdictStmt) String() string {
	if v.chain != "" {
		return verdictNames[v.kind] + " " + v.chain
	}
	return verdictNames[v.kind]
}
