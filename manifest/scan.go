package manifest

import (
	"encoding/json"
	"fmt"
)

// The scanner walks JSON text once (a JSON file's stream of values, or one
// YAML document after its conversion to JSON), checks its syntax, and
// notes where each top-level value is and, in an object, where the members
// the reader dispatches on are: apiVersion, kind and items (and, when
// items is an array, the same about each element, so a List in a List is
// probed too). The reader (document.go) reads apiVersion and kind from
// those spans and hands each object's span to its strict decoder, which
// reads the input bytes in place: a document is neither copied out of its
// stream nor decoded a second time to learn its kind, and a List's items
// are decoded one by one from their spans, the List itself with its items
// array emptied.
//
// The scanner validates completely (the JSON grammar of RFC 8259, as
// encoding/json accepts it; FuzzScan compares the two): a part of the
// input that is never decoded (a kind nftguard does not read, the rest of
// a List around its items) must still be well-formed, or the input is
// refused.

// maxDepth bounds nesting, as encoding/json does, so that hostile input
// cannot grow the stack without bound.
const maxDepth = 10000

// span is a byte range [start, end) of the scanned text. Every JSON value
// is at least one byte long, so the zero span means "absent".
type span struct{ start, end int }

func (s span) present() bool { return s.end > s.start }

// value is one scanned JSON value.
type value struct {
	span
	object bool
	// The last member of each name, as a decoder keeps the last one;
	// only noted for probed values (documents and List items).
	apiVersion, kind, items span
	// itemsArray says items is an array; elems are its elements, each
	// probed as well (a List in a List).
	itemsArray bool
	elems      []value
}

// syntaxError is the position and nature of the first syntax error.
type syntaxError struct {
	offset int
	msg    string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("%s at byte %d", e.msg, e.offset) }

type scanner struct {
	data  []byte
	pos   int
	depth int
}

// scanStream scans a stream of JSON values, one after another with
// optional white space between them (what json.Decoder reads), and probes
// each. On a syntax error it returns the values before it and the error.
func scanStream(data []byte) ([]value, error) {
	s := scanner{data: data}
	var out []value
	for {
		s.space()
		if s.pos == len(s.data) {
			return out, nil
		}
		var v value
		if err := s.value(&v, true); err != nil {
			return out, err
		}
		out = append(out, v)
	}
}

// scanOne scans a text that holds at most one JSON value; ok is false when
// it holds none (only white space).
func scanOne(data []byte) (v value, ok bool, err error) {
	s := scanner{data: data}
	s.space()
	if s.pos == len(s.data) {
		return value{}, false, nil
	}
	if err := s.value(&v, true); err != nil {
		return value{}, false, err
	}
	s.space()
	if s.pos != len(s.data) {
		return value{}, false, s.unexpected("after top-level value")
	}
	return v, true, nil
}

func (s *scanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) unexpected(context string) error {
	if s.pos >= len(s.data) {
		return &syntaxError{s.pos, "unexpected end of JSON input"}
	}
	return &syntaxError{s.pos, fmt.Sprintf("invalid character %q %s", s.data[s.pos], context)}
}

// value scans the value at s.pos (after white space). v, when not nil,
// receives its span; probe asks for its members to be noted.
func (s *scanner) value(v *value, probe bool) error {
	s.space()
	if s.pos >= len(s.data) {
		return s.unexpected("")
	}
	start := s.pos
	var err error
	switch c := s.data[s.pos]; {
	case c == '{':
		err = s.object(v, probe)
	case c == '[':
		err = s.array(nil)
	case c == '"':
		err = s.string()
	case c == '-' || ('0' <= c && c <= '9'):
		err = s.number()
	case c == 't':
		err = s.literal("true")
	case c == 'f':
		err = s.literal("false")
	case c == 'n':
		err = s.literal("null")
	default:
		err = s.unexpected("looking for beginning of value")
	}
	if err != nil {
		return err
	}
	if v != nil {
		v.span = span{start, s.pos}
	}
	return nil
}

func (s *scanner) enter() error {
	s.depth++
	if s.depth > maxDepth {
		return &syntaxError{s.pos, "exceeded max depth"}
	}
	return nil
}

func (s *scanner) object(v *value, probe bool) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer func() { s.depth-- }()
	s.pos++ // {
	if v != nil {
		v.object = true
	}
	s.space()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return nil
	}
	for {
		s.space()
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return s.unexpected("looking for beginning of object key string")
		}
		keyStart := s.pos
		if err := s.string(); err != nil {
			return err
		}
		key := s.data[keyStart:s.pos]
		s.space()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return s.unexpected("after object key")
		}
		s.pos++
		if err := s.member(v, probe, key); err != nil {
			return err
		}
		if done, err := s.separator('}', "after object key:value pair"); done || err != nil {
			return err
		}
	}
}

// separator reads what follows an object member or array element: ','
// (another follows) or closer (done).
func (s *scanner) separator(closer byte, context string) (done bool, err error) {
	s.space()
	if s.pos >= len(s.data) {
		return false, s.unexpected("")
	}
	switch s.data[s.pos] {
	case ',':
		s.pos++
		return false, nil
	case closer:
		s.pos++
		return true, nil
	}
	return false, s.unexpected(context)
}

// member scans one member's value, noting it in v when probing and the
// key is one the reader dispatches on.
func (s *scanner) member(v *value, probe bool, key []byte) error {
	if v == nil || !probe {
		return s.value(nil, false)
	}
	var m value
	switch memberName(key) {
	case "apiVersion":
		err := s.value(&m, false)
		v.apiVersion = m.span
		return err
	case "kind":
		err := s.value(&m, false)
		v.kind = m.span
		return err
	case "items":
		s.space()
		if s.pos < len(s.data) && s.data[s.pos] == '[' {
			start := s.pos
			var elems []value
			if err := s.array(&elems); err != nil {
				return err
			}
			v.items, v.itemsArray, v.elems = span{start, s.pos}, true, elems
			return nil
		}
		err := s.value(&m, false)
		v.items, v.itemsArray, v.elems = m.span, false, nil
		return err
	}
	return s.value(nil, false)
}

// memberName is the name a quoted key stands for, compared the way
// encoding/json compares it (after unquoting, case-sensitively as the
// strict decoder does). Plain keys, nearly all of them, cost no
// allocation.
func memberName(quoted []byte) string {
	if plain(quoted) {
		switch string(quoted[1 : len(quoted)-1]) {
		case "apiVersion":
			return "apiVersion"
		case "kind":
			return "kind"
		case "items":
			return "items"
		}
		return ""
	}
	var k string
	if json.Unmarshal(quoted, &k) != nil {
		return ""
	}
	return k
}

// plain says a quoted string has neither escapes nor bytes beyond ASCII,
// so its text is the bytes between the quotes (encoding/json would replace
// invalid UTF-8; plain strings have none).
func plain(quoted []byte) bool {
	for _, c := range quoted[1 : len(quoted)-1] {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

// array scans an array; elems, when not nil, receives each element,
// probed.
func (s *scanner) array(elems *[]value) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer func() { s.depth-- }()
	s.pos++ // [
	s.space()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return nil
	}
	for {
		if elems != nil {
			var e value
			if err := s.value(&e, true); err != nil {
				return err
			}
			*elems = append(*elems, e)
		} else if err := s.value(nil, false); err != nil {
			return err
		}
		if done, err := s.separator(']', "after array element"); done || err != nil {
			return err
		}
	}
}

func (s *scanner) string() error {
	s.pos++ // "
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return nil
		case c == '\\':
			s.pos++
			if s.pos >= len(s.data) {
				return s.unexpected("")
			}
			switch s.data[s.pos] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.pos++
			case 'u':
				s.pos++
				for range 4 {
					if s.pos >= len(s.data) {
						return s.unexpected("")
					}
					if !isHex(s.data[s.pos]) {
						return s.unexpected("in \\u hexadecimal character escape")
					}
					s.pos++
				}
			default:
				return s.unexpected("in string escape code")
			}
		case c < 0x20:
			return s.unexpected("in string literal")
		default:
			s.pos++
		}
	}
	return s.unexpected("")
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func (s *scanner) digits() int {
	n := 0
	for s.pos < len(s.data) && '0' <= s.data[s.pos] && s.data[s.pos] <= '9' {
		s.pos++
		n++
	}
	return n
}

func (s *scanner) number() error {
	if s.data[s.pos] == '-' {
		s.pos++
	}
	switch {
	case s.pos < len(s.data) && s.data[s.pos] == '0':
		s.pos++
	case s.digits() == 0:
		return s.unexpected("in numeric literal")
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if s.digits() == 0 {
			return s.unexpected("after decimal point in numeric literal")
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if s.digits() == 0 {
			return s.unexpected("in exponent of numeric literal")
		}
	}
	return nil
}

func (s *scanner) literal(word string) error {
	for i := range len(word) {
		if s.pos >= len(s.data) {
			return s.unexpected("")
		}
		if s.data[s.pos] != word[i] {
			return s.unexpected("in literal " + word)
		}
		s.pos++
	}
	return nil
}

// text is the string a member's value holds: "" when it is absent or
// null, an error when it is not a string.
func text(data []byte, s span) (string, error) {
	if !s.present() {
		return "", nil
	}
	raw := data[s.start:s.end]
	switch raw[0] {
	case 'n':
		return "", nil // null: the field stays empty, as a decoder leaves it
	case '"':
		if plain(raw) {
			return string(raw[1 : len(raw)-1]), nil
		}
		var out string
		if err := json.Unmarshal(raw, &out); err != nil {
			return "", err
		}
		return out, nil
	}
	return "", fmt.Errorf("not a string: %.20s", raw)
}
