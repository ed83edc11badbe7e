package fqdn

import (
	"strings"
)

// Names are compared as the labels they are on the wire, not as the text
// a DNS library presents them in. In presentation form (RFC 1035 5.1) a
// label may hold any byte: "\." is a '.' inside a label, "\\" a
// backslash, "\DDD" the byte of that decimal value, and "\X" the byte X.
// So "evil\.example.test" is two labels, "evil.example" and "test": a
// name in the zone "test", not one under "example.test", although its
// text ends in ".example.test". Normalize reads a name into its labels
// and writes them back in one canonical form, in which a '.' is always
// a label boundary:
//
//   - ASCII letters in lower case (RFC 4343: DNS compares them without
//     case; no other byte has a case);
//   - letters, digits, '-' and '_' as themselves, every other byte as
//     "\DDD", so each name has exactly one form;
//   - no trailing dot; the root is "".
//
// A text that is not a name (an empty label inside it, a label over 63
// bytes, over 255 bytes on the wire, an escape cut short or over 255)
// normalizes to invalidName, which no pattern matches.

// invalidName is what Normalize returns for a text that is no name: it
// cannot be the canonical form of one (a canonical form has no '\'
// followed by anything but three digits).
const invalidName = `\invalid`

const (
	maxLabel    = 63
	maxWireName = 255
)

// Normalize is a name as patterns are compared with it: its wire labels
// in canonical form (see above).
func Normalize(name string) string {
	if plain(name) {
		return strings.TrimSuffix(name, ".")
	}
	labels, ok := wireLabels(name)
	if !ok {
		return invalidName
	}
	var b strings.Builder
	for i, l := range labels {
		if i > 0 {
			b.WriteByte('.')
		}
		for j := 0; j < len(l); j++ {
			c := l[j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if canonicalByte(c) {
				b.WriteByte(c)
				continue
			}
			b.WriteByte('\\')
			b.WriteByte('0' + c/100)
			b.WriteByte('0' + c/10%10)
			b.WriteByte('0' + c%10)
		}
	}
	return b.String()
}

func canonicalByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// plain reports whether name is already canonical but for a trailing dot:
// the common case, which Normalize returns without allocating.
func plain(name string) bool {
	name = strings.TrimSuffix(name, ".")
	if len(name)+2 > maxWireName {
		return false
	}
	label := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '.':
			if label == 0 {
				return false
			}
			label = 0
		case canonicalByte(c):
			if label++; label > maxLabel {
				return false
			}
		default:
			return false
		}
	}
	return len(name) == 0 || label > 0
}

// wireLabels reads a name in presentation form into its labels, without
// the root's empty one.
func wireLabels(name string) ([]string, bool) {
	if name == "." || name == "" {
		return nil, true
	}
	var labels []string
	var cur []byte
	wire := 1 // the root's length byte
	closed := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		closed = false
		switch c {
		case '.':
			if len(cur) == 0 {
				return nil, false
			}
			labels = append(labels, string(cur))
			wire += 1 + len(cur)
			cur = cur[:0]
			closed = true
			continue
		case '\\':
			if i+1 >= len(name) {
				return nil, false
			}
			if isDigit(name[i+1]) {
				if i+3 >= len(name) || !isDigit(name[i+2]) || !isDigit(name[i+3]) {
					return nil, false
				}
				v := int(name[i+1]-'0')*100 + int(name[i+2]-'0')*10 + int(name[i+3]-'0')
				if v > 255 {
					return nil, false
				}
				c = byte(v)
				i += 3
			} else {
				c = name[i+1]
				i++
			}
		}
		cur = append(cur, c)
		if len(cur) > maxLabel {
			return nil, false
		}
	}
	if !closed {
		labels = append(labels, string(cur))
		wire += 1 + len(cur)
	}
	if wire > maxWireName {
		return nil, false
	}
	return labels, true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
