package nftsyntax

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/nftguard/nftguard/engine/nftwire"
)

// ElementText is one set or map element as nft prints it: Key is a value, a
// prefix, a range or a concatenation of those joined by " . "; Value is a
// verdict ("accept", "jump chain") for verdict maps, a value for data maps,
// and empty for sets.
type ElementText struct{ Key, Value string }

// span is one key part in interval form (lo == hi for a single value).
type span struct{ lo, hi []byte }

// ParseSetDecl builds a SetDecl from nft type names; dataType is "" for a
// plain set.
func ParseSetDecl(name, keyType, dataType string, interval bool) (SetDecl, error) {
	k, err := ParseType(keyType)
	if err != nil {
		return SetDecl{}, fmt.Errorf("set %s key: %w", name, err)
	}
	if k.IsVerdict() {
		return SetDecl{}, fmt.Errorf("set %s: verdict is not a key type", name)
	}
	d := SetDecl{Name: name, Key: k, Interval: interval}
	if dataType != "" {
		v, err := ParseType(dataType)
		if err != nil {
			return SetDecl{}, fmt.Errorf("map %s data: %w", name, err)
		}
		d.Data = &v
	}
	return d, nil
}

// EncodeElements converts a whole element list to kernel form as nft sends
// it for `add element` of the same text into an empty set.
func EncodeElements(d SetDecl, elems []ElementText) ([]nftwire.Elem, error) {
	if !d.Interval {
		return encodePlain(d, elems)
	}
	type item struct {
		parts []span
		elem  nftwire.Elem
		text  string
	}
	items := make([]item, 0, len(elems))
	for _, et := range elems {
		parts, err := parseElementKey(d, et.Key)
		if err != nil {
			return nil, fmt.Errorf("set %s element %q: %w", d.Name, et.Key, err)
		}
		var e nftwire.Elem
		if err := encodeValue(d, et.Value, &e); err != nil {
			return nil, fmt.Errorf("set %s element %q: %w", d.Name, et.Key, err)
		}
		items = append(items, item{parts: parts, elem: e, text: et.Key})
	}
	if d.Key.IsConcat() {
		// Concatenated interval sets (pipapo) take each range as one
		// element with an inclusive KEY_END, no interval-end elements.
		out := make([]nftwire.Elem, 0, len(items))
		for i, it := range items {
			var lo, hi []byte
			for j, p := range it.parts {
				lo = appendField(lo, d.Key, j, p.lo)
				hi = appendField(hi, d.Key, j, p.hi)
			}
			for _, prev := range items[:i] {
				if overlaps(prev.parts, it.parts) {
					return nil, fmt.Errorf("set %s: element %q overlaps %q", d.Name, it.text, prev.text)
				}
			}
			e := it.elem
			e.Key, e.KeyEnd = lo, hi
			out = append(out, e)
		}
		return out, nil
	}
	// A plain interval set is a segment list: a start element per interval
	// and an INTERVAL_END element at end+1, plus the zero sentinel nft
	// writes when the first interval does not start at zero.
	sort.SliceStable(items, func(i, j int) bool { return bytes.Compare(items[i].parts[0].lo, items[j].parts[0].lo) < 0 })
	var out []nftwire.Elem
	for i, it := range items {
		p := it.parts[0]
		if i > 0 {
			prev := items[i-1]
			if bytes.Compare(p.lo, prev.parts[0].hi) <= 0 {
				return nil, fmt.Errorf("set %s: element %q overlaps %q", d.Name, it.text, prev.text)
			}
		} else if !isZero(p.lo) {
			out = append(out, nftwire.Elem{Key: make([]byte, len(p.lo)), IntervalEnd: true})
		}
		e := it.elem
		e.Key = p.lo
		end, ok := increment(p.hi)
		if !ok {
			e.UserData = nftwire.ElemOpenInterval()
		}
		out = append(out, e)
		if ok {
			out = append(out, nftwire.Elem{Key: end, IntervalEnd: true})
		}
	}
	return out, nil
}

func overlaps(a, b []span) bool {
	for i := range a {
		if bytes.Compare(a[i].hi, b[i].lo) < 0 || bytes.Compare(b[i].hi, a[i].lo) < 0 {
			return false
		}
	}
	return true
}

// appendField appends field i of a key; concatenations pad fields to 4 bytes.
func appendField(b []byte, t Type, i int, v []byte) []byte {
	b = append(b, v...)
	if t.IsConcat() {
		for n := len(v); n%4 != 0; n++ {
			b = append(b, 0)
		}
	}
	return b
}

func parseElementKey(d SetDecl, key string) ([]span, error) {
	var one [1]string
	parts := one[:]
	if strings.Contains(key, " . ") || len(d.Key.Fields) != 1 {
		parts = strings.Split(key, " . ")
	} else {
		parts[0] = key
	}
	if len(parts) != len(d.Key.Fields) {
		return nil, fieldCountError(d, len(parts))
	}
	out := make([]span, len(parts))
	for i, s := range parts {
		sp, err := parseSpan(d, d.Key.Fields[i], strings.TrimSpace(s))
		if err != nil {
			return nil, err
		}
		out[i] = sp
	}
	return out, nil
}

func fieldCountError(d SetDecl, n int) error {
	return fmt.Errorf("key has %d fields, type %s has %d", n, d.Key, len(d.Key.Fields))
}

// parseSpan parses one (trimmed) key part of an element of d.
func parseSpan(d SetDecl, dt DataType, s string) (span, error) {
	if dt.Name == "ifname" {
		o, err := parseOperand(dt, s)
		if err != nil {
			return span{}, err
		}
		if o.wildcard {
			lo, hi := make([]byte, 16), make([]byte, 16)
			copy(lo, o.val)
			copy(hi, o.val)
			for j := len(o.val); j < 16; j++ {
				hi[j] = 0xff
			}
			return span{lo, hi}, nil
		}
		return span{o.val, o.val}, nil
	}
	o, err := parseKeyPart(dt, s)
	if err != nil {
		return span{}, err
	}
	var sp span
	switch o.kind {
	case opValue:
		sp = span{o.val, o.val}
	case opPrefix:
		hi := make([]byte, len(o.val))
		m := prefixMask(len(o.val), o.bits)
		for j := range hi {
			hi[j] = o.val[j] | ^m[j]
		}
		sp = span{o.val, hi}
	case opRange:
		sp = span{o.val, o.hi}
	}
	if d.Interval && dt.intervalBigEndian() {
		sp = span{reversed(sp.lo), reversed(sp.hi)}
	}
	return sp, nil
}

// reversed returns a copy of b in the opposite byte order.
func reversed(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		out[len(b)-1-i] = c
	}
	return out
}

func encodeValue(d SetDecl, v string, e *nftwire.Elem) error {
	if d.Data == nil {
		if v != "" {
			return fmt.Errorf("set %s is not a map", d.Name)
		}
		return nil
	}
	if v == "" {
		return fmt.Errorf("map %s needs a value", d.Name)
	}
	if d.Data.IsVerdict() {
		vd, err := parseVerdictText(v)
		if err != nil {
			return err
		}
		e.Verdict = vd
		return nil
	}
	if d.Data.IsConcat() {
		return fmt.Errorf("concatenated map data is not supported")
	}
	b, err := parseValue(d.Data.Fields[0], v)
	if err != nil {
		return err
	}
	e.Data = b
	return nil
}

func parseVerdictText(s string) (*nftwire.Verdict, error) {
	p := &parser{end: len(s) + 1}
	var err error
	if p.toks, err = lex(s, nil); err != nil {
		return nil, err
	}
	if p.done() {
		return nil, fmt.Errorf("empty verdict")
	}
	switch p.peek() {
	case "accept", "drop", "return", "continue", "jump", "goto":
	default:
		return nil, fmt.Errorf("invalid verdict %q", s)
	}
	v, err := p.verdict()
	if err != nil {
		return nil, fmt.Errorf("verdict %q: %w", s, err)
	}
	if !p.done() {
		return nil, fmt.Errorf("verdict %q: %w", s, p.errHere("unexpected text after the verdict"))
	}
	return &nftwire.Verdict{Kind: v.kind, Chain: v.chain}, nil
}

func verdictText(v *nftwire.Verdict) (string, error) {
	n, ok := verdictNames[v.Kind]
	if !ok {
		return "", fmt.Errorf("unsupported verdict %d", v.Kind)
	}
	if v.Kind == nftwire.VerdictJump || v.Kind == nftwire.VerdictGoto {
		return n + " " + v.Chain, nil
	}
	return n, nil
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// increment returns b+1 as a big-endian number; ok is false on overflow.
func increment(b []byte) ([]byte, bool) {
	out := bytes.Clone(b)
	for i := len(out) - 1; i >= 0; i-- {
		out[i]++
		if out[i] != 0 {
			return out, true
		}
	}
	return nil, false
}

func decrement(b []byte) []byte {
	out := bytes.Clone(b)
	for i := len(out) - 1; i >= 0; i-- {
		out[i]--
		if out[i] != 0xff {
			break
		}
	}
	return out
}

// DecodeElements converts kernel elements back to text; intervals are
// reconstructed whatever order the elements come in and printed like nft
// (prefix form where exact, for addresses), sorted by key.
func DecodeElements(d SetDecl, elems []nftwire.Elem) ([]ElementText, error) {
	var out []ElementText
	value := func(e nftwire.Elem) (string, error) {
		if d.Data == nil {
			return "", nil
		}
		if d.Data.IsVerdict() {
			if e.Verdict == nil {
				return "", fmt.Errorf("map %s: element without verdict", d.Name)
			}
			return verdictText(e.Verdict)
		}
		return formatValue(d.Data.Fields[0], e.Data)
	}
	if !d.Interval || d.Key.IsConcat() {
		for _, e := range elems {
			hi := e.Key
			if e.KeyEnd != nil {
				hi = e.KeyEnd
			}
			k, err := spanText(d.Key, d.Interval, e.Key, hi)
			if err != nil {
				return nil, fmt.Errorf("set %s: %w", d.Name, err)
			}
			v, err := value(e)
			if err != nil {
				return nil, err
			}
			out = append(out, ElementText{Key: k, Value: v})
		}
		if !d.Interval {
			return out, nil
		}
		return out, nil
	}
	sorted := append([]nftwire.Elem(nil), elems...)
	sort.SliceStable(sorted, func(i, j int) bool {
		if c := bytes.Compare(sorted[i].Key, sorted[j].Key); c != 0 {
			return c < 0
		}
		// At one key an end closes the interval before a start opens one.
		return sorted[i].IntervalEnd && !sorted[j].IntervalEnd
	})
	var open *nftwire.Elem
	emit := func(start nftwire.Elem, hi []byte) error {
		k, err := spanText(d.Key, d.Interval, start.Key, hi)
		if err != nil {
			return fmt.Errorf("set %s: %w", d.Name, err)
		}
		v, err := value(start)
		if err != nil {
			return err
		}
		out = append(out, ElementText{Key: k, Value: v})
		return nil
	}
	for i := range sorted {
		e := sorted[i]
		if e.IntervalEnd {
			if open == nil {
				continue // the zero sentinel, or a stray end
			}
			if err := emit(*open, decrement(e.Key)); err != nil {
				return nil, err
			}
			open = nil
			continue
		}
		if open != nil {
			return nil, fmt.Errorf("set %s: interval starting at %x has no end", d.Name, open.Key)
		}
		open = &sorted[i]
	}
	if open != nil {
		hi := bytes.Repeat([]byte{0xff}, len(open.Key))
		if err := emit(*open, hi); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// spanText prints key lo..hi field by field. In an interval set, fields
// nft converts to network order (intervalBigEndian) are converted back.
func spanText(t Type, interval bool, lo, hi []byte) (string, error) {
	if len(lo) != int(t.Len()) || len(hi) != int(t.Len()) {
		return "", fmt.Errorf("key has %d bytes, type %s wants %d", len(lo), t, t.Len())
	}
	parts := make([]string, len(t.Fields))
	off := 0
	for i, dt := range t.Fields {
		n := int(dt.Len)
		s, err := partText(dt, interval && dt.intervalBigEndian(), lo[off:off+n], hi[off:off+n])
		if err != nil {
			return "", err
		}
		parts[i] = s
		if t.IsConcat() {
			n = int(pad4(dt.Len))
		}
		off += n
	}
	return strings.Join(parts, " . "), nil
}

// partText prints one field lo..hi; swapped means the bytes are in network
// order although the type is host order (see intervalBigEndian). lo and hi
// compare as big-endian numbers either way.
func partText(dt DataType, swapped bool, lo, hi []byte) (string, error) {
	value, rangeEnd := formatValue, formatRangeEnd
	if swapped {
		value = func(dt DataType, b []byte) (string, error) { return formatValue(dt, reversed(b)) }
		rangeEnd = func(dt DataType, b []byte) (string, error) { return formatRangeEnd(dt, reversed(b)) }
	}
	if bytes.Equal(lo, hi) {
		return value(dt, lo)
	}
	if bits, ok := prefixOf(lo, hi); ok {
		// nft prints an exact prefix as one for types flagged
		// DTYPE_F_PREFIX: addresses, and marks (which are only
		// intervals in network order).
		if dt.hasPrefixForm() || swapped {
			s, err := value(dt, lo)
			return fmt.Sprintf("%s/%d", s, bits), err
		}
		if dt.Name == "ifname" && bits%8 == 0 && bits > 0 && !bytes.Contains(lo[:bits/8], []byte{0}) {
			return quote(string(lo[:bits/8]) + "*"), nil
		}
	}
	l, err := rangeEnd(dt, lo)
	if err != nil {
		return "", err
	}
	h, err := rangeEnd(dt, hi)
	return l + "-" + h, err
}

// prefixOf reports whether [lo, hi] is exactly a prefix, and its length.
func prefixOf(lo, hi []byte) (int, bool) {
	bits := 0
	for bits < len(lo)*8 {
		m := byte(0x80 >> (bits % 8))
		if lo[bits/8]&m != hi[bits/8]&m {
			break
		}
		bits++
	}
	m := prefixMask(len(lo), bits)
	for i := range lo {
		if lo[i]&^m[i] != 0 || hi[i]|m[i] != 0xff {
			return 0, false
		}
	}
	return bits, true
}
