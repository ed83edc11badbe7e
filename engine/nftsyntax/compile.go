package nftsyntax

import (
	"bytes"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftwire"
)

// CompileRule compiles one rule of the documented subset (see doc.go) into
// the expressions nft writes for it. Only inet tables are supported: that
// is the one table nftguard owns.
func CompileRule(fam Family, text string, sets Sets) (*Compiled, error) {
	if fam != unix.NFPROTO_INET {
		return nil, fmt.Errorf("compile %q: family %d not supported (only inet)", text, fam)
	}
	r, err := parseRule(text)
	if err != nil {
		return nil, fmt.Errorf("compile %q: %w", text, err)
	}
	c := &compiler{sets: sets, out: newCompiled()}
	for _, s := range r.stmts {
		if err := c.stmt(s); err != nil {
			return nil, fmt.Errorf("compile %q: %s: %w", text, s, err)
		}
	}
	if r.hasComment {
		if len(r.comment) > maxComment {
			return nil, fmt.Errorf("compile %q: comment longer than %d bytes", text, maxComment)
		}
		c.out.UserData = ruleComment(r.comment)
	}
	return &c.out.Compiled, nil
}

// compiler tracks the protocol context like nft does, so that a dependency
// (`meta nfproto ipv4` before `ip saddr`) is emitted once, and not at all
// when the rule already matched it explicitly.
type compiler struct {
	sets    Sets
	out     *compiledBuf
	nfproto byte
	l4proto byte
	// transport is set once the rule matched a transport protocol (a
	// tcp/udp/sctp field, or `meta l4proto`, `ip protocol`, `ip6
	// nexthdr` equal to a value or an anonymous set): nft allows a
	// dnat port only after one.
	transport bool
}

// compiledBuf is a Compiled allocated together with room for the
// expressions of a typical rule, its protocol dependencies (a rule has at
// most one of each kind: a second one is a conflict) and its value
// matches. It is kept within 512 bytes, the largest size the Go allocator
// serves without a per-object type header.
type compiledBuf struct {
	Compiled
	exprs [10]nftwire.Expr
	nfDep dep
	l4Dep dep
	cmps  [2]payloadCmp // for value matches on payload fields
	nCmps int
}

// payloadCmp returns a load-and-compare pair from the rule's own while
// there are any.
func (b *compiledBuf) payloadCmp() *payloadCmp {
	if b.nCmps < len(b.cmps) {
		b.nCmps++
		return &b.cmps[b.nCmps-1]
	}
	return &payloadCmp{}
}

func newCompiled() *compiledBuf {
	b := &compiledBuf{}
	b.Exprs = b.exprs[:0] // a longer rule's grow on append
	return b
}

func (c *compiler) emit(e ...nftwire.Expr) { c.out.Exprs = append(c.out.Exprs, e...) }

// dep is a protocol dependency's load and match with the matched byte
// (every rule that names an address or a port has one or two).
type dep struct {
	meta nftwire.Meta
	cmp  nftwire.Cmp
	val  [1]byte
}

func (c *compiler) depNfproto(v byte) error {
	return c.depOn(&c.nfproto, &c.out.nfDep, nftwire.MetaKeyNFPROTO, v, "conflicting protocols: ipv4 and ipv6 in one rule")
}

func (c *compiler) depL4proto(v byte) error {
	return c.depOn(&c.l4proto, &c.out.l4Dep, nftwire.MetaKeyL4PROTO, v, "conflicting transport protocols in one rule")
}

// depOn emits the dependency on protocol v of the meta key (cur holds the
// rule's protocol of that key so far, 0 for none) once per rule; another
// protocol than the rule's is the error conflict.
func (c *compiler) depOn(cur *byte, d *dep, key nftwire.MetaKey, v byte, conflict string) error {
	if *cur == v {
		return nil
	}
	if *cur != 0 {
		return errors.New(conflict)
	}
	c.emitDep(d, key, v)
	*cur = v
	return nil
}

func (c *compiler) emitDep(d *dep, key nftwire.MetaKey, v byte) {
	*d = dep{meta: nftwire.Meta{Key: key, Register: 1}, cmp: nftwire.Cmp{Op: nftwire.CmpOpEq, Register: 1}, val: [1]byte{v}}
	d.cmp.Data = d.val[:]
	c.emit(&d.meta, &d.cmp)
}

func (c *compiler) deps(fs []*field) error {
	for _, f := range fs {
		if f.nfproto != 0 {
			if err := c.depNfproto(f.nfproto); err != nil {
				return err
			}
		}
		if f.l4proto != 0 {
			c.transport = true
			if f.l4nfproto != 0 && c.l4proto != f.l4proto {
				if err := c.depNfproto(f.l4nfproto); err != nil {
					return err
				}
			}
			if err := c.depL4proto(f.l4proto); err != nil {
				return err
			}
		}
	}
	return nil
}

// regFor converts a 32-bit word offset into nft's register number: the
// 16-byte register NFT_REG_1.. when aligned, else NFT_REG32_xx (like nft's
// netlink_put_register).
func regFor(word uint32) uint32 {
	if word%4 == 0 {
		return 1 + word/4
	}
	return 8 + word
}

func load(f *field, reg, n uint32) nftwire.Expr {
	switch f.kind {
	case fieldPayload:
		return &nftwire.Payload{OperationType: nftwire.PayloadLoad, DestRegister: reg, Base: f.base, Offset: f.offset, Len: n}
	case fieldMeta:
		return &nftwire.Meta{Key: f.meta, Register: reg}
	}
	return &nftwire.Ct{Key: f.ct, Register: reg}
}

// loads emits the loads of a (concatenated) key into consecutive registers.
// For a lookup in an interval set, nft converts each host-order integer
// field (mark) to network order right after its load, because the set
// stores such keys in network order (see DataType.intervalBigEndian).
func (c *compiler) loads(fs []*field, interval bool) {
	var word uint32
	for _, f := range fs {
		reg := regFor(word)
		c.emit(load(f, reg, f.loadLen()))
		if interval && f.dt.intervalBigEndian() {
			c.emit(hton(reg, f.dt.Len))
		}
		word += pad4(f.dt.Len) / 4
	}
}

// hton is the byteorder expression nft emits to convert n bytes in reg to
// network order in place (`byteorder reg 1 = hton(reg 1, 4, 4)`).
func hton(reg, n uint32) *nftwire.Byteorder {
	return &nftwire.Byteorder{SourceRegister: reg, DestRegister: reg, Op: nftwire.ByteorderHton, Len: n, Size: n}
}

func (c *compiler) stmt(s stmt) error {
	switch s := s.(type) {
	case *matchStmt:
		return c.match(s)
	case *vmapStmt:
		if err := c.deps(s.fields); err != nil {
			return err
		}
		name, id, interval, err := c.setRef(s.fields, s.name, s.elems, true)
		if err != nil {
			return err
		}
		c.loads(s.fields, interval)
		c.emit(&nftwire.Lookup{SourceRegister: 1, DestRegister: 0, IsDestRegSet: true, SetName: name, SetID: id})
	case *markSetStmt:
		c.emit(&nftwire.Immediate{Register: 1, Data: s.val}, &nftwire.Meta{Key: nftwire.MetaKeyMARK, SourceRegister: true, Register: 1})
	case *counterStmt:
		c.emit(&nftwire.Counter{Packets: s.packets, Bytes: s.bytes})
	case *logStmt:
		l := &nftwire.Log{}
		if s.hasPrefix {
			l.Key |= 1 << unix.NFTA_LOG_PREFIX
			l.Data = []byte(s.prefix)
		}
		if s.hasGroup {
			l.Key |= 1 << unix.NFTA_LOG_GROUP
			l.Group = s.group
		}
		c.emit(l)
	case *limitStmt:
		c.emit(&nftwire.Limit{Type: nftwire.LimitTypePkts, Rate: s.rate, Unit: s.unit, Burst: s.burst, Over: s.over})
	case *rejectStmt:
		return c.reject(s)
	case *natStmt:
		if s.dnat {
			return c.dnat(s)
		}
		if s.mapName != "" {
			d, ok := c.lookupSet(s.mapName)
			if !ok {
				return fmt.Errorf("map @%s not found", s.mapName)
			}
			want := TypeIPv4Addr
			if s.nfproto == nfprotoIPv6 {
				want = TypeIPv6Addr
			}
			if d.Data == nil || d.Data.IsConcat() || d.Data.Fields[0].Name != want.Name {
				return fmt.Errorf("map @%s does not map to %s", s.mapName, want.Name)
			}
			if err := checkKey(d, s.mapFields); err != nil {
				return err
			}
			if err := c.deps(s.mapFields); err != nil {
				return err
			}
			c.loads(s.mapFields, d.Interval)
			c.emit(&nftwire.Lookup{SourceRegister: 1, DestRegister: 1, IsDestRegSet: true, SetName: s.mapName})
		} else {
			c.emit(&nftwire.Immediate{Register: 1, Data: s.addr})
		}
		c.emit(&nftwire.NAT{Type: nftwire.NATTypeSourceNAT, Family: uint32(s.nfproto), RegAddrMin: 1, RegAddrMax: 1})
	case masqStmt:
		c.emit(&nftwire.Masq{})
	case notrackStmt:
		c.emit(&nftwire.Notrack{})
	case *verdictStmt:
		c.emit(&nftwire.Verdict{Kind: s.kind, Chain: s.chain})
	default:
		return fmt.Errorf("unsupported statement %T", s)
	}
	return nil
}

// dnat emits what nft does for `dnat ip to ADDR[:PORT]`: the address
// (and port) as immediates in registers 1 (and 2), then the nat
// expression. nft sends only the minimum registers; the kernel sets the
// maxima to them and adds NF_NAT_RANGE_MAP_IPS, and it dumps them so:
// sending them too makes the rule equal its read-back, as for snat.
func (c *compiler) dnat(s *natStmt) error {
	if s.port != nil && !c.transport {
		return fmt.Errorf("transport protocol mapping is only valid after transport protocol match")
	}
	n := &nftwire.NAT{Type: nftwire.NATTypeDestNAT, Family: uint32(s.nfproto), RegAddrMin: 1, RegAddrMax: 1}
	c.emit(&nftwire.Immediate{Register: 1, Data: s.addr})
	if s.port != nil {
		c.emit(&nftwire.Immediate{Register: 2, Data: s.port})
		n.RegProtoMin, n.RegProtoMax, n.Specified = 2, 2, true
	}
	c.emit(n)
	return nil
}

func (c *compiler) lookupSet(name string) (SetDecl, bool) {
	if c.sets == nil {
		return SetDecl{}, false
	}
	return c.sets.LookupSet(name)
}

func checkKey(d SetDecl, fs []*field) error {
	if !keyTypeIs(d.Key, fs) {
		return fmt.Errorf("@%s has key type %s, the rule gives %s", d.Name, d.Key, Type{Fields: dts(fs)})
	}
	return nil
}

// keyTypeIs reports whether t prints like the type of the key fs (the
// datatype names, which contain no " . ", are the same).
func keyTypeIs(t Type, fs []*field) bool {
	if len(t.Fields) != len(fs) {
		return false
	}
	for i, f := range fs {
		if t.Fields[i].Name != f.dt.Name {
			return false
		}
	}
	return true
}

// setRef resolves a named set or builds the anonymous one, returning the
// lookup's set name and id, and whether the set is an interval set.
func (c *compiler) setRef(fs []*field, name string, elems []ElementText, vmap bool) (string, uint32, bool, error) {
	if name != "" {
		d, ok := c.lookupSet(name)
		if !ok {
			return "", 0, false, fmt.Errorf("set @%s not found", name)
		}
		if err := checkKey(d, fs); err != nil {
			return "", 0, false, err
		}
		if vmap != (d.Data != nil && d.Data.IsVerdict()) {
			if vmap {
				return "", 0, false, fmt.Errorf("@%s is not a verdict map", name)
			}
			if d.Data != nil {
				return "", 0, false, fmt.Errorf("@%s is a map, not a set", name)
			}
		}
		return name, 0, d.Interval, nil
	}
	for _, f := range fs {
		if f.dt.Name == "ifname" {
			for _, e := range elems {
				if bytes.HasSuffix([]byte(e.Key), []byte(`*"`)) {
					return "", 0, false, fmt.Errorf("interface wildcards in anonymous sets are not supported")
				}
			}
		}
	}
	d := SetDecl{Name: "__set%d", Key: Type{Fields: dts(fs)}}
	if vmap {
		d.Name = "__map%d"
		v := Type{Fields: []DataType{TypeVerdict}}
		d.Data = &v
	}
	// nft makes an anonymous set an (auto-merging) interval set exactly
	// when one of its elements is a range or prefix.
	enc, err := EncodeElements(d, elems)
	if err != nil {
		d.Interval, d.AutoMerge = true, true
		var err2 error
		if enc, err2 = EncodeElements(d, elems); err2 != nil {
			return "", 0, false, err2
		}
	}
	ud, err := anonSetUserData(fs, d.Interval, vmap)
	if err != nil {
		return "", 0, false, err
	}
	flags := uint32(unix.NFT_SET_ANONYMOUS | unix.NFT_SET_CONSTANT)
	if d.Interval {
		flags |= unix.NFT_SET_INTERVAL
		if d.Key.IsConcat() {
			flags |= setConcat
		}
	}
	if vmap {
		flags |= unix.NFT_SET_MAP
	}
	id := uint32(len(c.out.AnonSets))
	c.out.AnonSets = append(c.out.AnonSets, AnonSet{Decl: d, Elements: enc, Flags: flags, UserData: ud})
	return d.Name, id, d.Interval, nil
}

// setConcat is NFT_SET_CONCAT (missing from x/sys/unix): nft sets it on
// interval sets with a concatenated key.
const setConcat = 0x80

// SetFlags is NFTA_SET_FLAGS as nft sends it for a named set declaration.
func SetFlags(d SetDecl) uint32 {
	var f uint32
	if d.Interval {
		f |= unix.NFT_SET_INTERVAL
		if d.Key.IsConcat() {
			f |= setConcat
		}
	}
	if d.Data != nil {
		f |= unix.NFT_SET_MAP
	}
	if d.Timeout {
		f |= unix.NFT_SET_TIMEOUT
	}
	return f
}

func cmpOp(neq bool) nftwire.CmpOp {
	if neq {
		return nftwire.CmpOpNeq
	}
	return nftwire.CmpOpEq
}

func (c *compiler) match(m *matchStmt) error {
	f := m.fields[0]
	rhs := m.rhs
	// nft turns a one-element anonymous set into a plain comparison.
	if rhs.kind == opSet && len(m.fields) == 1 && len(rhs.elems) == 1 {
		o, err := parseOperand(f.dt, rhs.elems[0].Key)
		if err != nil {
			return err
		}
		rhs = o
	}
	if f.valueOnly && (len(m.fields) > 1 || rhs.kind != opValue || m.mask != nil) {
		return fmt.Errorf("%s: only a single value is supported", f.name)
	}
	if err := c.deps(m.fields); err != nil {
		return err
	}
	switch rhs.kind {
	case opSet, opNamedSet:
		if rhs.kind == opSet && len(m.fields) > 1 && len(rhs.elems) == 1 {
			return fmt.Errorf("a one-element concatenated set is not supported")
		}
		name, id, interval, err := c.setRef(m.fields, rhs.name, rhs.elems, false)
		if err != nil {
			return err
		}
		c.loads(m.fields, interval)
		c.emit(&nftwire.Lookup{SourceRegister: 1, SetName: name, SetID: id, Invert: m.neq})
		if rhs.kind == opSet && !m.neq && len(m.fields) == 1 && isProtoField(f) {
			c.transport = true
		}
		return nil
	case opFlags:
		mask := leU32(rhs.flags)
		c.emit(load(f, 1, 4),
			&nftwire.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: make([]byte, 4)},
			&nftwire.Cmp{Op: cmpOp(!m.neq), Register: 1, Data: make([]byte, 4)})
		return nil
	case opPrefix:
		if rhs.bits == 0 {
			return fmt.Errorf("a /0 prefix matches everything; drop the match")
		}
		if rhs.bits%8 == 0 {
			n := uint32(rhs.bits / 8)
			c.emit(load(f, 1, n), &nftwire.Cmp{Op: cmpOp(m.neq), Register: 1, Data: rhs.val[:n]})
			return nil
		}
		n := f.loadLen()
		c.emit(load(f, 1, n),
			&nftwire.Bitwise{SourceRegister: 1, DestRegister: 1, Len: n, Mask: prefixMask(int(n), rhs.bits), Xor: make([]byte, n)},
			&nftwire.Cmp{Op: cmpOp(m.neq), Register: 1, Data: rhs.val})
		return nil
	case opRange:
		c.emit(load(f, 1, f.loadLen()))
		if m.neq {
			c.emit(&nftwire.Range{Op: nftwire.CmpOpNeq, Register: 1, FromData: rhs.val, ToData: rhs.hi})
		} else {
			c.emit(&nftwire.Cmp{Op: nftwire.CmpOpGte, Register: 1, Data: rhs.val}, &nftwire.Cmp{Op: nftwire.CmpOpLte, Register: 1, Data: rhs.hi})
		}
		return nil
	}
	// A single value.
	if f.kind == fieldPayload && m.mask == nil {
		// The common case (an address or a port) allocates its load
		// and compare together.
		v := c.out.payloadCmp()
		*v = payloadCmp{
			load: nftwire.Payload{OperationType: nftwire.PayloadLoad, DestRegister: 1, Base: f.base, Offset: f.offset, Len: f.loadLen()},
			cmp:  nftwire.Cmp{Op: cmpOp(m.neq), Register: 1, Data: rhs.val},
		}
		c.emit(&v.load, &v.cmp)
	} else {
		c.emit(load(f, 1, f.loadLen()))
		if m.mask != nil {
			c.emit(&nftwire.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: m.mask, Xor: make([]byte, 4)})
		}
		c.emit(&nftwire.Cmp{Op: cmpOp(m.neq), Register: 1, Data: rhs.val})
	}
	if !m.neq && m.mask == nil && !rhs.wildcard {
		// An explicit protocol match is context for later dependencies.
		switch f.name {
		case "meta nfproto":
			c.nfproto = rhs.val[0]
		case "meta l4proto":
			c.l4proto = rhs.val[0]
		}
		if isProtoField(f) {
			c.transport = true
		}
	}
	return nil
}

// isProtoField reports whether a field is a transport protocol number.
func isProtoField(f *field) bool {
	switch f.name {
	case "meta l4proto", "ip protocol", "ip6 nexthdr":
		return true
	}
	return false
}

// payloadCmp is a payload load and the compare of its value.
type payloadCmp struct {
	load nftwire.Payload
	cmp  nftwire.Cmp
}

func leU32(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)} }

func (c *compiler) reject(r *rejectStmt) error {
	switch r.kind {
	case "":
		// Like nft, a plain reject after an address-family match becomes
		// that family's ICMP port-unreachable.
		switch c.nfproto {
		case nfprotoIPv4:
			c.emit(&nftwire.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 3})
		case nfprotoIPv6:
			c.emit(&nftwire.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: 4})
		default:
			c.emit(&nftwire.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_PORT_UNREACH})
		}
	case "icmpx":
		c.emit(&nftwire.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: r.code})
	case "icmp", "icmpv6":
		v := byte(nfprotoIPv4)
		if r.kind == "icmpv6" {
			v = nfprotoIPv6
		}
		if err := c.depNfproto(v); err != nil {
			return err
		}
		c.emit(&nftwire.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: r.code})
	case "tcp":
		if err := c.depL4proto(protoTCP); err != nil {
			return err
		}
		c.emit(&nftwire.Reject{Type: unix.NFT_REJECT_TCP_RST})
	}
	return nil
}
