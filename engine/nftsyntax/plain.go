package nftsyntax

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/nftguard/nftguard/engine/nftwire"
)

// encodePlain is EncodeElements for a set without flags interval, where
// every element is one key: keys are parsed straight into one buffer
// shared by all elements (a set can hold hundreds of thousands), and
// duplicates are found by a map keyed by value rather than by string.
// Errors are EncodeElements' own, in the same order: first a key or value
// that does not parse, then, element by element, a range or prefix, or a
// duplicate.
func encodePlain(d SetDecl, elems []ElementText) ([]nftwire.Elem, error) {
	keyLen := int(d.Key.Len())
	keys := make([]byte, 0, keyLen*len(elems))
	out := make([]nftwire.Elem, len(elems))
	firstRange := len(elems) // first element with a range or prefix
	sameLen := true          // every key has keyLen bytes
	for i, et := range elems {
		start := len(keys)
		var single bool
		var err error
		keys, single, err = appendElementKey(keys, d, et.Key)
		if err != nil {
			return nil, fmt.Errorf("set %s element %q: %w", d.Name, et.Key, err)
		}
		if err := encodeValue(d, et.Value, &out[i]); err != nil {
			return nil, fmt.Errorf("set %s element %q: %w", d.Name, et.Key, err)
		}
		// The full slice expression keeps an append to one key from
		// writing over the next.
		out[i].Key = keys[start:len(keys):len(keys)]
		sameLen = sameLen && len(out[i].Key) == keyLen
		if !single && i < firstRange {
			firstRange = i
		}
	}
	dup := firstDup(out[:firstRange], keyLen, sameLen)
	if dup >= 0 {
		return nil, fmt.Errorf("set %s: duplicate element %q", d.Name, elems[dup].Key)
	}
	if firstRange < len(elems) {
		return nil, fmt.Errorf("set %s element %q: a range or prefix needs flags interval", d.Name, elems[firstRange].Key)
	}
	return out, nil
}

// appendElementKey appends the kernel key of one element of a set without
// flags interval to b, as parseElementKey and appendField build it;
// single is false when a part is a range or prefix (which such a set
// refuses).
func appendElementKey(b []byte, d SetDecl, key string) (_ []byte, single bool, err error) {
	n := len(d.Key.Fields)
	if n != 1 || strings.Contains(key, " . ") {
		if c := strings.Count(key, " . ") + 1; c != n {
			return b, false, fieldCountError(d, c)
		}
	}
	single = true
	rest := key
	for i, dt := range d.Key.Fields {
		part := rest
		if i < n-1 {
			part, rest, _ = strings.Cut(rest, " . ")
		}
		start := len(b)
		one := false
		if b, one, err = appendKeyPart(b, d, dt, strings.TrimSpace(part)); err != nil {
			return b, false, err
		}
		single = single && one
		if d.Key.IsConcat() {
			for len(b)-start < int(pad4(uint32(len(b)-start))) {
				b = append(b, 0)
			}
		}
	}
	return b, single, nil
}

// appendKeyPart appends one key part (the low end of a range or prefix,
// which single reports). A plain value (no '/' or '-', not an ifname,
// whose quotes and wildcards parseSpan handles) is parsed straight into b:
// parseKeyPart would parse it with parseValue alone too, with the same
// error. Anything else goes through parseSpan.
func appendKeyPart(b []byte, d SetDecl, dt DataType, s string) (_ []byte, single bool, err error) {
	if dt.Name != "ifname" && strings.IndexByte(s, '/') < 0 && strings.IndexByte(s, '-') < 0 {
		b, err = appendValue(b, dt, s)
		return b, true, err
	}
	sp, err := parseSpan(d, dt, s)
	if err != nil {
		return b, false, err
	}
	return append(b, sp.lo...), string(sp.lo) == string(sp.hi), nil
}

// firstDup returns the index of the first element whose key equals an
// earlier one's, or -1. When the keys all have keyLen bytes (sameLen), as
// a set's do, short ones are compared as zero-padded arrays, which a map
// hashes without allocating a string per key.
func firstDup(elems []nftwire.Elem, keyLen int, sameLen bool) int {
	switch {
	case len(elems) <= 16:
		// An anonymous set in a rule: comparing every pair is cheaper
		// than building a map.
		for i := range elems {
			for j := range i {
				if bytes.Equal(elems[i].Key, elems[j].Key) {
					return i
				}
			}
		}
		return -1
	case !sameLen:
	case keyLen <= 4:
		return firstDupBy(elems, func(b []byte) (k [4]byte) { copy(k[:], b); return k })
	case keyLen <= 16:
		return firstDupBy(elems, func(b []byte) (k [16]byte) { copy(k[:], b); return k })
	}
	return firstDupBy(elems, func(b []byte) string { return string(b) })
}

func firstDupBy[K comparable](elems []nftwire.Elem, key func([]byte) K) int {
	seen := make(map[K]struct{}, len(elems))
	for i, e := range elems {
		k := key(e.Key)
		if _, dup := seen[k]; dup {
			return i
		}
		seen[k] = struct{}{}
	}
	return -1
}

// AppendElementKey appends the kernel key of one element of a set without
// flags interval to b, exactly as EncodeElements encodes it, for callers
// that add elements one at a time on a hot path (a timeout set's elements,
// added per DNS answer) and keep b from call to call. A range or prefix
// that is not a single value is refused, as such a set refuses it.
func AppendElementKey(b []byte, d SetDecl, key string) ([]byte, error) {
	if d.Interval {
		return b, fmt.Errorf("set %s: element keys of an interval set are not single values", d.Name)
	}
	start := len(b)
	out, single, err := appendElementKey(b, d, key)
	if err != nil {
		return b[:start], fmt.Errorf("set %s element %q: %w", d.Name, key, err)
	}
	if !single {
		return b[:start], fmt.Errorf("set %s element %q: a range or prefix needs flags interval", d.Name, key)
	}
	if uint32(len(out)-start) != d.Key.Len() {
		return b[:start], fmt.Errorf("set %s element %q: key is %d bytes, set key is %d", d.Name, key, len(out)-start, d.Key.Len())
	}
	return out, nil
}
