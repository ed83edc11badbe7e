package nftsyntax

import (
	"bytes"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftwire"
)

// RenderRule turns compiled expressions back into the text `nft list`
// prints for them. Anonymous lookups (set names starting "__set"/"__map")
// resolve by SetID as an index into c.AnonSets.
func RenderRule(fam Family, c *Compiled, sets Sets) (string, error) {
	if fam != unix.NFPROTO_INET {
		return "", fmt.Errorf("render: family %d not supported (only inet)", fam)
	}
	r, err := decompile(c, sets)
	if err != nil {
		return "", fmt.Errorf("render: %w", err)
	}
	return r.String(), nil
}

// decompiler walks the expressions like nft's netlink_delinearize: loads
// are held until the expression that consumes them, and protocol matches
// become context that later payloads resolve against; a protocol match
// that only served as such a dependency is dropped from the text.
type decompiler struct {
	c    *Compiled
	sets Sets
	ex   []nftwire.Expr
	i    int
	out  []stmt
	drop map[int]bool

	nfproto, l4proto byte
	nfDep, l4Dep     int // index in out of a droppable dependency, or -1
}

func decompile(c *Compiled, sets Sets) (*ruleAST, error) {
	d := &decompiler{c: c, sets: sets, ex: c.Exprs, drop: map[int]bool{}, nfDep: -1, l4Dep: -1}
	for d.i < len(d.ex) {
		if err := d.step(); err != nil {
			return nil, err
		}
	}
	r := &ruleAST{}
	for i, s := range d.out {
		if !d.drop[i] {
			r.stmts = append(r.stmts, s)
		}
	}
	if len(c.UserData) > 0 {
		cm, ok, err := parseRuleComment(c.UserData)
		if err != nil {
			return nil, err
		}
		if ok {
			if err := CheckQuoted(cm); err != nil {
				return nil, fmt.Errorf("comment: %w", err)
			}
		}
		r.comment, r.hasComment = cm, ok
	}
	if len(r.stmts) == 0 {
		return nil, fmt.Errorf("empty rule")
	}
	return r, nil
}

func (d *decompiler) peek(n int) nftwire.Expr {
	if d.i+n < len(d.ex) {
		return d.ex[d.i+n]
	}
	return nil
}

func (d *decompiler) errf(format string, args ...any) error {
	return fmt.Errorf("expression %d: %s", d.i, fmt.Sprintf(format, args...))
}

func isLoad(e nftwire.Expr) bool {
	switch e := e.(type) {
	case *nftwire.Payload:
		return e.OperationType == nftwire.PayloadLoad
	case *nftwire.Meta:
		return !e.SourceRegister
	case *nftwire.Ct:
		return !e.SourceRegister
	}
	return false
}

func (d *decompiler) step() error {
	e := d.ex[d.i]
	switch e := e.(type) {
	case *nftwire.Payload, *nftwire.Meta, *nftwire.Ct:
		if isLoad(e) {
			return d.matchOrLookup()
		}
	case *nftwire.Immediate:
		if e.Register != 1 {
			break
		}
		switch n := d.peek(1).(type) {
		case *nftwire.Meta:
			if n.SourceRegister && n.Key == nftwire.MetaKeyMARK && n.Register == 1 && len(e.Data) == 4 {
				d.out = append(d.out, &markSetStmt{val: e.Data})
				d.i += 2
				return nil
			}
		case *nftwire.NAT:
			s, err := d.nat(n, e.Data, nil, nil, "")
			if err != nil {
				return err
			}
			d.out = append(d.out, s)
			d.i += 2
			return nil
		case *nftwire.Immediate:
			// dnat to an address and a port.
			if n2, ok := d.peek(2).(*nftwire.NAT); ok && n.Register == 2 {
				s, err := d.nat(n2, e.Data, n.Data, nil, "")
				if err != nil {
					return err
				}
				d.out = append(d.out, s)
				d.i += 3
				return nil
			}
		}
	case *nftwire.Verdict:
		if _, ok := verdictNames[e.Kind]; ok {
			d.out = append(d.out, &verdictStmt{kind: e.Kind, chain: e.Chain})
			d.i++
			return nil
		}
	case *nftwire.Counter:
		d.out = append(d.out, &counterStmt{packets: e.Packets, bytes: e.Bytes})
		d.i++
		return nil
	case *nftwire.Log:
		l := &logStmt{}
		if e.Key&(1<<unix.NFTA_LOG_PREFIX) != 0 || len(e.Data) > 0 {
			l.prefix, l.hasPrefix = string(bytes.TrimRight(e.Data, "\x00")), true
			if err := CheckQuoted(l.prefix); err != nil {
				return d.errf("log prefix: %v", err)
			}
		}
		if e.Key&(1<<unix.NFTA_LOG_GROUP) != 0 {
			l.group, l.hasGroup = e.Group, true
		}
		d.out = append(d.out, l)
		d.i++
		return nil
	case *nftwire.Limit:
		if e.Type != nftwire.LimitTypePkts {
			break
		}
		d.out = append(d.out, &limitStmt{rate: e.Rate, unit: e.Unit, burst: e.Burst, over: e.Over})
		d.i++
		return nil
	case *nftwire.Reject:
		r := &rejectStmt{code: e.Code}
		switch e.Type {
		case unix.NFT_REJECT_ICMPX_UNREACH:
			r.kind = "icmpx"
			if e.Code == unix.NFT_REJECT_ICMPX_PORT_UNREACH {
				r.kind, r.code = "", 0
			}
		case unix.NFT_REJECT_TCP_RST:
			// nft keeps `meta l4proto tcp` visible before a tcp reset.
			r.kind, r.code = "tcp", 0
		case unix.NFT_REJECT_ICMP_UNREACH:
			switch d.nfproto {
			case nfprotoIPv4:
				r.kind = "icmp"
			case nfprotoIPv6:
				r.kind = "icmpv6"
			default:
				return d.errf("icmp reject without an address family")
			}
			d.useDep(&d.nfDep)
		default:
			return d.errf("unsupported reject type %d", e.Type)
		}
		d.out = append(d.out, r)
		d.i++
		return nil
	case *nftwire.Masq:
		if !e.Random && !e.FullyRandom && !e.Persistent && !e.ToPorts {
			d.out = append(d.out, masqStmt{})
			d.i++
			return nil
		}
	case *nftwire.Notrack:
		d.out = append(d.out, notrackStmt{})
		d.i++
		return nil
	}
	return d.errf("unsupported expression %T", e)
}

func (d *decompiler) useDep(dep *int) {
	if *dep >= 0 {
		d.drop[*dep] = true
		*dep = -1
	}
}

// fieldOf resolves a load to its selector using the protocol context.
func (d *decompiler) fieldOf(e nftwire.Expr) (*field, error) {
	switch e := e.(type) {
	case *nftwire.Payload:
		if f := fieldForPayload(e, d.nfproto, d.l4proto); f != nil {
			return f, nil
		}
		if f := prefixField(e, d.nfproto); f != nil {
			return f, nil
		}
		return nil, d.errf("unsupported payload load base %d offset %d len %d", e.Base, e.Offset, e.Len)
	case *nftwire.Meta:
		if f := fieldForMeta(e.Key); f != nil {
			return f, nil
		}
		return nil, d.errf("unsupported meta key %d", e.Key)
	case *nftwire.Ct:
		if f := fieldForCt(e.Key); f != nil && e.Direction == 0 {
			return f, nil
		}
		return nil, d.errf("unsupported ct key %d", e.Key)
	}
	return nil, d.errf("not a load: %T", e)
}

func loadReg(e nftwire.Expr) uint32 {
	switch e := e.(type) {
	case *nftwire.Payload:
		return e.DestRegister
	case *nftwire.Meta:
		return e.Register
	case *nftwire.Ct:
		return e.Register
	}
	return 0
}

// useFieldDeps drops the dependency matches a field consumed.
func (d *decompiler) useFieldDeps(f *field) {
	if f.kind != fieldPayload {
		return
	}
	if f.base == nh {
		d.useDep(&d.nfDep)
	} else if f.l4proto != 0 {
		d.useDep(&d.l4Dep)
		if f.l4nfproto != 0 {
			d.useDep(&d.nfDep)
		}
	}
}

func (d *decompiler) matchOrLookup() error {
	// Gather the loads of a (concatenated) key.
	var fs []*field
	var loads []nftwire.Expr
	var swapped []bool // per field: converted to network order; nil if none
	var word uint32
	for {
		e := d.peek(0)
		if e == nil || !isLoad(e) {
			break
		}
		if loadReg(e) != regFor(word) {
			if len(loads) == 0 {
				return d.errf("load into register %d", loadReg(e))
			}
			break
		}
		f, err := d.fieldOf(e)
		if err != nil {
			return err
		}
		fs = append(fs, f)
		loads = append(loads, e)
		word += pad4(f.dt.Len) / 4
		d.i++
		// nft converts a host-order key (mark) to network order before
		// looking it up in an interval set.
		if b, ok := d.peek(0).(*nftwire.Byteorder); ok {
			reg := loadReg(e)
			if !f.dt.intervalBigEndian() || b.Op != nftwire.ByteorderHton || b.SourceRegister != reg ||
				b.DestRegister != reg || b.Len != f.dt.Len || b.Size != f.dt.Len {
				return d.errf("unsupported byteorder after the load of %s", f.name)
			}
			if swapped == nil {
				swapped = make([]bool, len(fs))
			}
			swapped = append(swapped[:len(fs)-1], true)
			d.i++
		} else if swapped != nil {
			swapped = append(swapped, false)
		}
	}
	next := d.peek(0)
	if lk, ok := next.(*nftwire.Lookup); ok {
		return d.lookup(fs, swapped, lk)
	}
	if swapped != nil {
		return d.errf("byteorder conversion of %s not followed by a lookup", fieldsText(fs))
	}
	if len(fs) > 1 {
		// Only the first load is consumed by a non-lookup; the rest start
		// new statements.
		d.i -= len(fs) - 1
		fs, loads = fs[:1], loads[:1]
	}
	f, ld := fs[0], loads[0]
	m := &matchStmt{fields: fs}
	switch n := next.(type) {
	case *nftwire.Cmp:
		if n.Register != 1 {
			return d.errf("cmp on register %d", n.Register)
		}
		switch n.Op {
		case nftwire.CmpOpEq, nftwire.CmpOpNeq:
			m.neq = n.Op == nftwire.CmpOpNeq
			d.i++
			if p, ok := ld.(*nftwire.Payload); ok && p.Len < f.dt.Len {
				full := make([]byte, f.dt.Len)
				copy(full, n.Data)
				m.rhs = operand{kind: opPrefix, val: full, bits: int(p.Len) * 8}
			} else if f.dt.Name == "ifname" && len(n.Data) < 16 {
				m.rhs = operand{kind: opValue, val: n.Data, wildcard: true}
			} else {
				m.rhs = operand{kind: opValue, val: n.Data}
			}
		case nftwire.CmpOpGte:
			hi, ok := d.peek(1).(*nftwire.Cmp)
			if !ok || hi.Op != nftwire.CmpOpLte || hi.Register != 1 {
				return d.errf("cmp gte without cmp lte")
			}
			m.rhs = operand{kind: opRange, val: n.Data, hi: hi.Data}
			d.i += 2
		default:
			return d.errf("unsupported cmp op %d", n.Op)
		}
	case *nftwire.Range:
		if n.Op != nftwire.CmpOpNeq && n.Op != nftwire.CmpOpEq {
			return d.errf("unsupported range op %d", n.Op)
		}
		m.neq = n.Op == nftwire.CmpOpNeq
		m.rhs = operand{kind: opRange, val: n.FromData, hi: n.ToData}
		d.i++
	case *nftwire.Bitwise:
		c, ok := d.peek(1).(*nftwire.Cmp)
		if !ok || (c.Op != nftwire.CmpOpEq && c.Op != nftwire.CmpOpNeq) || !isZero(n.Xor) {
			return d.errf("unsupported bitwise")
		}
		d.i += 2
		switch {
		case f.dt.Name == "ct_state":
			if !isZero(c.Data) || len(n.Mask) != 4 {
				return d.errf("unsupported ct state comparison")
			}
			m.neq = c.Op == nftwire.CmpOpEq
			m.rhs = operand{kind: opFlags, flags: uint32(n.Mask[0]) | uint32(n.Mask[1])<<8 | uint32(n.Mask[2])<<16 | uint32(n.Mask[3])<<24}
		case f.dt.Name == "mark":
			m.neq = c.Op == nftwire.CmpOpNeq
			m.mask = n.Mask
			m.rhs = operand{kind: opValue, val: c.Data}
		case f.dt.hasPrefixForm():
			bits, ok := prefixOf(make([]byte, len(n.Mask)), invert(n.Mask))
			if !ok {
				return d.errf("bitwise mask is not a prefix")
			}
			m.neq = c.Op == nftwire.CmpOpNeq
			m.rhs = operand{kind: opPrefix, val: c.Data, bits: bits}
		default:
			return d.errf("unsupported bitwise on %s", f.name)
		}
	default:
		return d.errf("load of %s not followed by a comparison", f.name)
	}
	d.useFieldDeps(f)
	idx := len(d.out)
	d.out = append(d.out, m)
	if m.rhs.kind == opValue && !m.neq && m.mask == nil && !m.rhs.wildcard {
		switch f.name {
		case "meta nfproto":
			d.nfproto, d.nfDep = m.rhs.val[0], idx
		case "meta l4proto":
			d.l4proto, d.l4Dep = m.rhs.val[0], idx
		}
	}
	return nil
}

func invert(b []byte) []byte {
	out := make([]byte, len(b))
	for i := range b {
		out[i] = ^b[i]
	}
	return out
}

// lookup renders a lookup of the key fs; swapped tells which fields were
// converted to network order (nil: none), which nft does exactly for the
// host-order integer fields of a key looked up in an interval set.
func (d *decompiler) lookup(fs []*field, swapped []bool, lk *nftwire.Lookup) error {
	if lk.SourceRegister != 1 {
		return d.errf("lookup from register %d", lk.SourceRegister)
	}
	interval, known := d.lookupInterval(lk)
	if known {
		for i, f := range fs {
			want := interval && f.dt.intervalBigEndian()
			if got := swapped != nil && swapped[i]; got != want {
				if want {
					return d.errf("lookup of %s in interval set %s without the byteorder conversion nft emits", f.name, lk.SetName)
				}
				return d.errf("byteorder conversion of %s before a lookup in non-interval set %s", f.name, lk.SetName)
			}
		}
	}
	for _, f := range fs {
		d.useFieldDeps(f)
	}
	d.i++
	anon := strings.HasPrefix(lk.SetName, "__set") || strings.HasPrefix(lk.SetName, "__map")
	var elems []ElementText
	if anon {
		if int(lk.SetID) >= len(d.c.AnonSets) {
			return d.errf("anonymous set id %d out of range", lk.SetID)
		}
		as := d.c.AnonSets[lk.SetID]
		var err error
		if elems, err = DecodeElements(as.Decl, as.Elements); err != nil {
			return err
		}
	}
	switch {
	case !lk.IsDestRegSet:
		m := &matchStmt{fields: fs, neq: lk.Invert}
		if anon {
			m.rhs = operand{kind: opSet, elems: elems}
			if len(elems) == 1 && len(fs) == 1 {
				o, err := parseOperand(fs[0].dt, elems[0].Key)
				if err != nil {
					return err
				}
				m.rhs = o
			}
		} else {
			m.rhs = operand{kind: opNamedSet, name: lk.SetName}
		}
		d.out = append(d.out, m)
	case lk.DestRegister == 0:
		v := &vmapStmt{fields: fs}
		if anon {
			v.elems = elems
		} else {
			v.name = lk.SetName
		}
		d.out = append(d.out, v)
	case lk.DestRegister == 1 && !anon:
		n, ok := d.peek(0).(*nftwire.NAT)
		if !ok {
			return d.errf("map lookup into register 1 not followed by nat")
		}
		s, err := d.nat(n, nil, nil, fs, lk.SetName)
		if err != nil {
			return err
		}
		d.out = append(d.out, s)
		d.i++
	default:
		return d.errf("unsupported lookup")
	}
	return nil
}

// nat decodes a nat expression whose address (and, for dnat, port) came
// in registers 1 (and 2) from immediates (addr, port) or a map lookup.
func (d *decompiler) nat(n *nftwire.NAT, addr, port []byte, fs []*field, mapName string) (*natStmt, error) {
	dnat := n.Type == nftwire.NATTypeDestNAT
	if (n.Type != nftwire.NATTypeSourceNAT && !dnat) || n.RegAddrMin != 1 || (n.RegAddrMax != 1 && n.RegAddrMax != 0) ||
		n.Random || n.FullyRandom || n.Persistent || n.Prefix || (dnat && mapName != "") {
		return nil, d.errf("unsupported nat")
	}
	if port == nil {
		if n.RegProtoMin != 0 || n.RegProtoMax != 0 || n.Specified {
			return nil, d.errf("unsupported nat")
		}
	} else if !dnat || len(port) != 2 || n.RegProtoMin != 2 || (n.RegProtoMax != 2 && n.RegProtoMax != 0) || !n.Specified {
		return nil, d.errf("unsupported nat port")
	}
	s := &natStmt{dnat: dnat, nfproto: byte(n.Family), addr: addr, port: port, mapFields: fs, mapName: mapName}
	switch {
	case n.Family == nfprotoIPv4 && (addr == nil || len(addr) == 4):
	case n.Family == nfprotoIPv6 && (addr == nil || len(addr) == 16):
	default:
		return nil, d.errf("unsupported nat family %d", n.Family)
	}
	return s, nil
}

// lookupInterval reports whether the set a lookup refers to is an interval
// set; known is false when the set cannot be resolved here.
func (d *decompiler) lookupInterval(lk *nftwire.Lookup) (interval, known bool) {
	if strings.HasPrefix(lk.SetName, "__set") || strings.HasPrefix(lk.SetName, "__map") {
		if int(lk.SetID) < len(d.c.AnonSets) {
			return d.c.AnonSets[lk.SetID].Decl.Interval, true
		}
		return false, false
	}
	if d.sets == nil {
		return false, false
	}
	sd, ok := d.sets.LookupSet(lk.SetName)
	return sd.Interval, ok
}
