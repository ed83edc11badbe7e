package nftsyntax

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// The datatypes this package knows, with nft's ids (TYPE_* in datatype.h).
var (
	TypeVerdict     = DataType{Name: "verdict", Magic: 1, Len: 0}
	TypeIPv4Addr    = DataType{Name: "ipv4_addr", Magic: 7, Len: 4}
	TypeIPv6Addr    = DataType{Name: "ipv6_addr", Magic: 8, Len: 16}
	TypeInetProto   = DataType{Name: "inet_proto", Magic: 12, Len: 1}
	TypeInetService = DataType{Name: "inet_service", Magic: 13, Len: 2}
	TypeMark        = DataType{Name: "mark", Magic: 19, Len: 4, HostOrder: true}
	TypeIfname      = DataType{Name: "ifname", Magic: 41, Len: 16, HostOrder: true}

	// Types that only appear on the left of rule matches, never as set keys.
	typeNfproto = DataType{Name: "nfproto", Magic: 2, Len: 1}
	typeCtState = DataType{Name: "ct_state", Magic: 26, Len: 4, HostOrder: true}
	// ICMPv6 types and the IPv6 hop limit are matched one value at a
	// time (the policy's neighbour discovery rules); they are never set
	// keys, so their set user data is not modelled.
	typeICMPv6Type = DataType{Name: "icmpv6_type", Magic: 29, Len: 1}
	typeInteger8   = DataType{Name: "integer", Magic: 4, Len: 1}
)

// icmpv6TypeNames are nft's names of ICMPv6 types (`nft describe icmpv6
// type`); where two names share a number nft prints the first.
var icmpv6TypeNames = []struct {
	num  byte
	name string
}{
	{1, "destination-unreachable"}, {2, "packet-too-big"}, {3, "time-exceeded"}, {4, "parameter-problem"},
	{128, "echo-request"}, {129, "echo-reply"}, {130, "mld-listener-query"}, {131, "mld-listener-report"},
	{132, "mld-listener-done"}, {132, "mld-listener-reduction"}, {133, "nd-router-solicit"}, {134, "nd-router-advert"},
	{135, "nd-neighbor-solicit"}, {136, "nd-neighbor-advert"}, {137, "nd-redirect"}, {138, "router-renumbering"},
	{141, "ind-neighbor-solicit"}, {142, "ind-neighbor-advert"}, {143, "mld2-listener-report"},
}

var dataTypes = []DataType{TypeVerdict, TypeIPv4Addr, TypeIPv6Addr, TypeInetProto, TypeInetService, TypeMark, TypeIfname}

// concatTypeBits is how many bits of a concatenated type id each field
// takes (TYPE_BITS in nft's datatype.h).
const concatTypeBits = 6

// nft's byte-order codes as recorded in set user data (enum byteorder).
const (
	byteorderInvalid = 0
	byteorderHost    = 1
	byteorderBig     = 2
)

// ParseType parses a set key or map data type: one datatype name or several
// joined by " . ".
func ParseType(s string) (Type, error) {
	parts := strings.Split(s, ".")
	var t Type
	for _, p := range parts {
		p = strings.TrimSpace(p)
		dt, ok := dataTypeByName(p)
		if !ok {
			return Type{}, fmt.Errorf("parse type %q: unknown datatype %q", s, p)
		}
		t.Fields = append(t.Fields, dt)
	}
	if len(t.Fields) > 1 {
		for _, f := range t.Fields {
			if f.Name == "verdict" {
				return Type{}, fmt.Errorf("parse type %q: verdict cannot be concatenated", s)
			}
		}
		if len(t.Fields) > 32/concatTypeBits {
			return Type{}, fmt.Errorf("parse type %q: too many concatenated fields", s)
		}
	}
	return t, nil
}

func dataTypeByName(name string) (DataType, bool) {
	for _, dt := range dataTypes {
		if dt.Name == name {
			return dt, true
		}
	}
	return DataType{}, false
}

// String renders the type as nft prints it ("ipv4_addr . inet_service").
func (t Type) String() string {
	names := make([]string, len(t.Fields))
	for i, f := range t.Fields {
		names[i] = f.Name
	}
	return strings.Join(names, " . ")
}

// IsConcat reports whether the type is a concatenation of several fields.
func (t Type) IsConcat() bool { return len(t.Fields) > 1 }

// IsVerdict reports whether the type is the verdict type.
func (t Type) IsVerdict() bool { return len(t.Fields) == 1 && t.Fields[0].Name == "verdict" }

// Len is the key length as the kernel sees it: a concatenation pads every
// field to a 4-byte register.
func (t Type) Len() uint32 {
	if len(t.Fields) == 1 {
		return t.Fields[0].Len
	}
	var n uint32
	for _, f := range t.Fields {
		n += pad4(f.Len)
	}
	return n
}

// Magic is the nft datatype id sent as NFTA_SET_KEY_TYPE/NFTA_SET_DATA_TYPE;
// a concatenation packs its fields' ids 6 bits each, first field highest.
// Verdict maps send NFT_DATA_VERDICT as data type instead (see WireDataType).
func (t Type) Magic() uint32 {
	var m uint32
	for _, f := range t.Fields {
		m = m<<concatTypeBits | f.Magic
	}
	return m
}

// WireDataType is the NFTA_SET_DATA_TYPE value nft sends for a map whose
// data has this type: NFT_DATA_VERDICT for verdicts, the magic otherwise.
func (t Type) WireDataType() uint32 {
	if t.IsVerdict() {
		return 0xffffff00
	}
	return t.Magic()
}

func pad4(n uint32) uint32 { return (n + 3) &^ 3 }

// byteorder is the byte order nft records for a set of this type.
func (t Type) byteorder() uint32 {
	if t.IsConcat() {
		return byteorderInvalid
	}
	return t.Fields[0].byteorder()
}

func (d DataType) byteorder() uint32 {
	switch d.Name {
	case "ipv4_addr", "ipv6_addr", "inet_service":
		return byteorderBig
	case "mark", "ifname", "ct_state":
		return byteorderHost
	}
	// inet_proto and verdict have no byte order (single byte / opaque).
	return byteorderInvalid
}

//go:generate go run gen_protocols.go

// protoEntry is one line of /etc/protocols (see protocols.go).
type protoEntry struct {
	num     byte
	name    string
	aliases []string
}

// protoNames is the name nft prints for each protocol number (the first
// /etc/protocols entry with that number, as getprotobynumber returns it);
// "" where the number has no name and prints as a number.
// protoNumbers resolves every name and alias nft accepts on input
// (getprotobyname, case-sensitive), plus the keyword "icmpv6" of nft's
// grammar. Both come from the table compiled into protocols.go: the binary
// never reads /etc/protocols, so it behaves the same in a scratch image.
var protoNames, protoNumbers = func() ([256]string, map[string]byte) {
	var names [256]string
	nums := map[string]byte{"icmpv6": 58}
	for _, p := range protoTable {
		if names[p.num] == "" {
			names[p.num] = p.name
		}
		for _, n := range append([]string{p.name}, p.aliases...) {
			if _, dup := nums[n]; !dup {
				nums[n] = p.num
			}
		}
	}
	return names, nums
}()

// ctStateBits are ct state names in the order nft prints a bitmask.
var ctStateBits = []struct {
	bit  uint32
	name string
}{
	{1, "invalid"}, {2, "established"}, {4, "related"}, {8, "new"}, {64, "untracked"},
}

// parseValue converts one literal of a datatype to the bytes the kernel
// compares (network order for addresses and ports, host order for marks).
func parseValue(dt DataType, s string) ([]byte, error) {
	// dt.Len is every literal's exact length: one allocation, no spare
	// capacity that an append could share.
	v, err := appendValue(make([]byte, 0, dt.Len), dt, s)
	if err != nil {
		return nil, err
	}
	return v, nil
}

// appendValue appends the bytes of one literal (see parseValue) to b, so
// that callers encoding many values can put them in one buffer.
func appendValue(b []byte, dt DataType, s string) ([]byte, error) {
	switch dt.Name {
	case "ipv4_addr", "ipv6_addr":
		if v, ok := parseDottedQuad(s); ok && dt.Name == "ipv4_addr" {
			return append(b, v[:]...), nil
		}
		a, err := netip.ParseAddr(s)
		if err != nil || (dt.Name == "ipv4_addr") != a.Is4() || a.Zone() != "" {
			return b, fmt.Errorf("invalid %s %q", dt.Name, s)
		}
		if a.Is4() {
			v := a.As4()
			return append(b, v[:]...), nil
		}
		v := a.As16()
		return append(b, v[:]...), nil
	case "inet_proto":
		if n, ok := protoNumbers[s]; ok {
			return append(b, n), nil
		}
		n, err := strconv.ParseUint(s, 0, 8)
		if err != nil {
			return b, fmt.Errorf("invalid inet_proto %q", s)
		}
		return append(b, byte(n)), nil
	case "inet_service":
		n, err := strconv.ParseUint(s, 10, 16)
		if err != nil {
			return b, fmt.Errorf("invalid inet_service %q (a port number)", s)
		}
		return binary.BigEndian.AppendUint16(b, uint16(n)), nil
	case "mark":
		n, err := strconv.ParseUint(s, 0, 32)
		if err != nil {
			return b, fmt.Errorf("invalid mark %q", s)
		}
		return binary.LittleEndian.AppendUint32(b, uint32(n)), nil
	case "ifname":
		name, ok := unquote(s)
		if !ok {
			name = s
		}
		if name == "" || len(name) >= 16 || strings.Contains(name, "*") || hasControl(name) {
			return b, fmt.Errorf("invalid ifname %q", s)
		}
		b = append(b, name...)
		return append(b, make([]byte, 16-len(name))...), nil
	case "nfproto":
		switch s {
		case "ipv4":
			return append(b, 2), nil
		case "ipv6":
			return append(b, 10), nil
		}
		return b, fmt.Errorf("invalid nfproto %q (ipv4 or ipv6)", s)
	case "icmpv6_type":
		for _, t := range icmpv6TypeNames {
			if t.name == s {
				return append(b, t.num), nil
			}
		}
		n, err := strconv.ParseUint(s, 10, 8)
		if err != nil {
			return b, fmt.Errorf("invalid icmpv6_type %q", s)
		}
		return append(b, byte(n)), nil
	case "integer":
		n, err := strconv.ParseUint(s, 10, 8)
		if err != nil {
			return b, fmt.Errorf("invalid 8-bit integer %q", s)
		}
		return append(b, byte(n)), nil
	}
	return b, fmt.Errorf("datatype %s has no literal values", dt.Name)
}

// parseDottedQuad parses the common form of an IPv4 address, four
// decimal fields of 0-255 without leading zeros, a few times faster than
// netip.ParseAddr. It accepts nothing netip.ParseAddr refuses (ok is false
// for anything else, which the caller hands to netip.ParseAddr), and the
// bytes are the same (TestDottedQuad, FuzzDottedQuad).
func parseDottedQuad(s string) (v [4]byte, ok bool) {
	field, digits, n := 0, 0, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			if digits == 1 && n == 0 {
				return v, false // leading zero
			}
			n = n*10 + int(c-'0')
			digits++
			if n > 255 {
				return v, false
			}
		case c == '.' && digits > 0 && field < 3:
			v[field] = byte(n)
			field, digits, n = field+1, 0, 0
		default:
			return v, false
		}
	}
	if field != 3 || digits == 0 {
		return v, false
	}
	v[3] = byte(n)
	return v, true
}

// formatValue is the inverse of parseValue, printing like nft does.
func formatValue(dt DataType, b []byte) (string, error) {
	if int(dt.Len) != len(b) {
		return "", fmt.Errorf("%s value has %d bytes, want %d", dt.Name, len(b), dt.Len)
	}
	switch dt.Name {
	case "ipv4_addr", "ipv6_addr":
		a, _ := netip.AddrFromSlice(b)
		return a.String(), nil
	case "inet_proto":
		if n := protoNames[b[0]]; n != "" {
			return n, nil
		}
		return strconv.Itoa(int(b[0])), nil
	case "inet_service":
		return strconv.Itoa(int(binary.BigEndian.Uint16(b))), nil
	case "mark":
		return fmt.Sprintf("0x%08x", binary.LittleEndian.Uint32(b)), nil
	case "ifname":
		n := strings.IndexByte(string(b), 0)
		if n < 0 {
			n = len(b)
		}
		if err := CheckQuoted(string(b[:n])); err != nil {
			return "", err
		}
		return quote(string(b[:n])), nil
	case "nfproto":
		switch b[0] {
		case 2:
			return "ipv4", nil
		case 10:
			return "ipv6", nil
		}
		return strconv.Itoa(int(b[0])), nil
	case "icmpv6_type":
		for _, t := range icmpv6TypeNames {
			if t.num == b[0] {
				return t.name, nil
			}
		}
		return strconv.Itoa(int(b[0])), nil
	case "integer":
		return strconv.Itoa(int(b[0])), nil
	}
	return "", fmt.Errorf("datatype %s has no literal values", dt.Name)
}

// formatRangeEnd prints one end of a range: nft prints ranges with numeric
// output forced (range_expr_print), so protocols print as numbers there.
func formatRangeEnd(dt DataType, b []byte) (string, error) {
	if dt.Name == "inet_proto" && len(b) == 1 {
		return strconv.Itoa(int(b[0])), nil
	}
	return formatValue(dt, b)
}

// intervalBigEndian reports whether nft stores keys of this type in network
// byte order in interval sets although the type is host order elsewhere:
// host-order integers (mark) are converted so that the kernel's interval
// arithmetic works. In the set's own elements, only the keys change (map
// data stays host order, and the set user data still records host order);
// a rule that looks such a key up in an interval set converts the loaded
// value first with a byteorder expression (hton).
// ifname is a string, not an integer, and is never converted.
func (d DataType) intervalBigEndian() bool {
	return d.Name == "mark"
}

// hasPrefixForm reports whether nft prints intervals of this type as
// prefixes where they are exact (DTYPE_F_PREFIX: addresses only).
func (d DataType) hasPrefixForm() bool {
	return d.Name == "ipv4_addr" || d.Name == "ipv6_addr"
}

func unquote(s string) (string, bool) {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1], true
	}
	return "", false
}

// quote renders a string literal as nft does: in double quotes, no escapes
// (nft's grammar has none; strings containing a quote are refused on input).
func quote(s string) string { return `"` + s + `"` }
