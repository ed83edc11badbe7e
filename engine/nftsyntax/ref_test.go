package nftsyntax

// The functions here are the element and value parsers as they were
// before encodePlain, parseKeyPart's single parse and appendValue; the
// tests hold the current ones to them, byte for byte and error for error.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nftguard/nftguard/engine/nftwire"
)

func parseValueRef(dt DataType, s string) ([]byte, error) {
	switch dt.Name {
	case "ipv4_addr", "ipv6_addr":
		a, err := netip.ParseAddr(s)
		if err != nil || (dt.Name == "ipv4_addr") != a.Is4() || a.Zone() != "" {
			return nil, fmt.Errorf("invalid %s %q", dt.Name, s)
		}
		return a.AsSlice(), nil
	case "inet_proto":
		if n, ok := protoNumbers[s]; ok {
			return []byte{n}, nil
		}
		n, err := strconv.ParseUint(s, 0, 8)
		if err != nil {
			return nil, fmt.Errorf("invalid inet_proto %q", s)
		}
		return []byte{byte(n)}, nil
	case "inet_service":
		n, err := strconv.ParseUint(s, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("invalid inet_service %q (a port number)", s)
		}
		return binary.BigEndian.AppendUint16(nil, uint16(n)), nil
	case "mark":
		n, err := strconv.ParseUint(s, 0, 32)
		if err != nil {
			return nil, fmt.Errorf("invalid mark %q", s)
		}
		return binary.LittleEndian.AppendUint32(nil, uint32(n)), nil
	case "ifname":
		name, ok := unquote(s)
		if !ok {
			name = s
		}
		if name == "" || len(name) >= 16 || strings.Contains(name, "*") || hasControl(name) {
			return nil, fmt.Errorf("invalid ifname %q", s)
		}
		b := make([]byte, 16)
		copy(b, name)
		return b, nil
	case "nfproto":
		switch s {
		case "ipv4":
			return []byte{2}, nil
		case "ipv6":
			return []byte{10}, nil
		}
		return nil, fmt.Errorf("invalid nfproto %q (ipv4 or ipv6)", s)
	}
	return nil, fmt.Errorf("datatype %s has no literal values", dt.Name)
}

func parseKeyPartRef(dt DataType, s string) (operand, error) {
	if i := strings.IndexByte(s, '/'); i >= 0 && dt.hasPrefixForm() {
		v, err := parseValueRef(dt, s[:i])
		if err != nil {
			return operand{}, err
		}
		bits, err := strconv.Atoi(s[i+1:])
		if err != nil || bits < 0 || bits > int(dt.Len)*8 {
			return operand{}, errorf("invalid prefix length in %q", s)
		}
		if !bytes.Equal(v, maskBytes(v, bits)) {
			return operand{}, errorf("%q has host bits set beyond /%d", s, bits)
		}
		if bits == int(dt.Len)*8 {
			return operand{kind: opValue, val: v}, nil
		}
		return operand{kind: opPrefix, val: v, bits: bits}, nil
	}
	if i := rangeDashRef(dt, s); i > 0 {
		lo, err := parseValueRef(dt, s[:i])
		if err != nil {
			return operand{}, err
		}
		hi, err := parseValueRef(dt, s[i+1:])
		if err != nil {
			return operand{}, err
		}
		if bytes.Compare(lo, hi) > 0 {
			return operand{}, errorf("range %q is reversed", s)
		}
		if dt.HostOrder {
			return operand{}, errorf("ranges of %s are not supported", dt.Name)
		}
		return operand{kind: opRange, val: lo, hi: hi}, nil
	}
	v, err := parseValueRef(dt, s)
	if err != nil {
		if i := strings.IndexByte(s, '-'); i >= 0 && nameLen(s) > i {
			return operand{}, errorf("invalid %s %q: nft reads it as one name, not a range of names", dt.Name, s)
		}
	}
	return operand{kind: opValue, val: v}, err
}

func rangeDashRef(dt DataType, s string) int {
	if _, err := parseValueRef(dt, s); err == nil {
		return -1
	}
	i := strings.IndexByte(s, '-')
	if i >= 0 && nameLen(s) > i {
		return -1
	}
	return i
}

func parseOperandRef(dt DataType, s string) (operand, error) {
	if dt.Name == "ifname" {
		name, ok := unquote(s)
		if !ok {
			name = s
		}
		if strings.HasSuffix(name, "*") && len(name) > 1 && !strings.Contains(name[:len(name)-1], "*") {
			if len(name) > 16 || hasControl(name) {
				return operand{}, errorf("invalid ifname %q", s)
			}
			return operand{kind: opValue, val: []byte(name[:len(name)-1]), wildcard: true}, nil
		}
		v, err := parseValueRef(dt, s)
		return operand{kind: opValue, val: v}, err
	}
	k, err := parseKeyPartRef(dt, s)
	if err != nil {
		return operand{}, err
	}
	return k, nil
}

func parseElementKeyRef(d SetDecl, key string) ([]span, error) {
	var one [1]string
	parts := one[:]
	if strings.Contains(key, " . ") || len(d.Key.Fields) != 1 {
		parts = strings.Split(key, " . ")
	} else {
		parts[0] = key
	}
	if len(parts) != len(d.Key.Fields) {
		return nil, fmt.Errorf("key has %d fields, type %s has %d", len(parts), d.Key, len(d.Key.Fields))
	}
	out := make([]span, len(parts))
	for i, s := range parts {
		dt := d.Key.Fields[i]
		s = strings.TrimSpace(s)
		if dt.Name == "ifname" {
			o, err := parseOperandRef(dt, s)
			if err != nil {
				return nil, err
			}
			if o.wildcard {
				lo, hi := make([]byte, 16), make([]byte, 16)
				copy(lo, o.val)
				copy(hi, o.val)
				for j := len(o.val); j < 16; j++ {
					hi[j] = 0xff
				}
				out[i] = span{lo, hi}
				continue
			}
			out[i] = span{o.val, o.val}
			continue
		}
		o, err := parseKeyPartRef(dt, s)
		if err != nil {
			return nil, err
		}
		switch o.kind {
		case opValue:
			out[i] = span{o.val, o.val}
		case opPrefix:
			hi := make([]byte, len(o.val))
			m := prefixMask(len(o.val), o.bits)
			for j := range hi {
				hi[j] = o.val[j] | ^m[j]
			}
			out[i] = span{o.val, hi}
		case opRange:
			out[i] = span{o.val, o.hi}
		}
		if d.Interval && dt.intervalBigEndian() {
			out[i] = span{reversed(out[i].lo), reversed(out[i].hi)}
		}
	}
	return out, nil
}

func encodePlainRef(d SetDecl, elems []ElementText) ([]nftwire.Elem, error) {
	type item struct {
		parts []span
		elem  nftwire.Elem
		text  string
	}
	items := make([]item, 0, len(elems))
	for _, et := range elems {
		parts, err := parseElementKeyRef(d, et.Key)
		if err != nil {
			return nil, fmt.Errorf("set %s element %q: %w", d.Name, et.Key, err)
		}
		var e nftwire.Elem
		if err := encodeValue(d, et.Value, &e); err != nil {
			return nil, fmt.Errorf("set %s element %q: %w", d.Name, et.Key, err)
		}
		items = append(items, item{parts: parts, elem: e, text: et.Key})
	}
	seen := make(map[string]bool, len(items))
	out := make([]nftwire.Elem, 0, len(items))
	for _, it := range items {
		var key []byte
		for i, p := range it.parts {
			if !bytes.Equal(p.lo, p.hi) {
				return nil, fmt.Errorf("set %s element %q: a range or prefix needs flags interval", d.Name, it.text)
			}
			if len(it.parts) == 1 && !d.Key.IsConcat() {
				key = p.lo // parsed for this element alone
				break
			}
			key = appendField(key, d.Key, i, p.lo)
		}
		if seen[string(key)] {
			return nil, fmt.Errorf("set %s: duplicate element %q", d.Name, it.text)
		}
		seen[string(key)] = true
		e := it.elem
		e.Key = key
		out = append(out, e)
	}
	return out, nil
}

// The recorded goldens are also what the reference parsers make.
func TestReferenceEqualsValueGoldens(t *testing.T) {
	if *update {
		t.Skip("recording")
	}
	checkGolden(t, filepath.Join("testdata", "values.golden"), renderValues(parseValueRef, parseKeyPartRef))
}

// The simple reference is the old one on every case.
func TestSlowEqualsReference(t *testing.T) {
	for _, d := range plainDecls(t) {
		for _, elems := range append(plainCases, bigPlainCases()...) {
			got, err := encodePlainSlow(d, elems)
			want, wantErr := encodePlainRef(d, elems)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) || !sameElems(got, want) {
				t.Errorf("%s %v: %v\ngot  %v, %v\nwant %v, %v", d.Key, d.Data, elems, got, err, want, wantErr)
			}
		}
	}
}
