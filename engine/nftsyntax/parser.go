package nftsyntax

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/nftguard/nftguard/engine/nftwire"
)

// parser turns tokens into a ruleAST. It never guesses: anything outside
// the documented subset is a SyntaxError naming the token.
type parser struct {
	toks []token
	pos  int
	end  int // column just past the text, for errors at end of input
}

// newMatch returns one of the match statements allocated with the rule
// while there are any. (The parser does not hold r: escape analysis would
// then take the tokens for part of the AST and move them to the heap.)
func (r *ruleAST) newMatch() *matchStmt {
	if r.nMatch < len(r.matchBuf) {
		r.nMatch++
		return &r.matchBuf[r.nMatch-1]
	}
	return &matchStmt{}
}

func parseRule(text string) (*ruleAST, error) {
	// Tokens are only needed while parsing (the AST keeps substrings of
	// text), so a typical rule's live on the stack.
	var buf [24]token
	toks, err := lex(text, buf[:0])
	if err != nil {
		return nil, err
	}
	r := &ruleAST{}
	r.stmts = r.stmtBuf[:0]
	p := &parser{toks: toks, end: len(text) + 1}
	for !p.done() {
		if p.peek() == "comment" {
			p.next()
			t, err := p.expectString("comment text")
			if err != nil {
				return nil, err
			}
			r.comment, r.hasComment = t, true
			if !p.done() {
				return nil, p.errHere("comment must end the rule")
			}
			break
		}
		s, err := p.stmt(r)
		if err != nil {
			return nil, err
		}
		r.stmts = append(r.stmts, s)
	}
	if len(r.stmts) == 0 {
		return nil, &SyntaxError{Col: p.end, Reason: "empty rule"}
	}
	return r, nil
}

func (p *parser) done() bool { return p.pos >= len(p.toks) }

func (p *parser) peek() string {
	if p.done() {
		return ""
	}
	return p.toks[p.pos].text
}

func (p *parser) peekAt(n int) string {
	if p.pos+n >= len(p.toks) {
		return ""
	}
	return p.toks[p.pos+n].text
}

func (p *parser) next() token {
	t := p.toks[p.pos]
	p.pos++
	return t
}

func (p *parser) errHere(reason string) error {
	if p.done() {
		return &SyntaxError{Col: p.end, Reason: reason}
	}
	t := p.toks[p.pos]
	return &SyntaxError{Col: t.col, Token: t.text, Reason: reason}
}

func (p *parser) errAt(t token, reason string) error {
	return &SyntaxError{Col: t.col, Token: t.text, Reason: reason}
}

func (p *parser) expect(word, what string) error {
	if p.peek() != word {
		return p.errHere("expected " + what)
	}
	p.next()
	return nil
}

func (p *parser) expectWord(what string) (token, error) {
	if p.done() || p.toks[p.pos].quoted || isPunctToken(p.peek()) {
		return token{}, p.errHere("expected " + what)
	}
	return p.next(), nil
}

// isPunctToken reports whether a token is punctuation (a word never
// contains any).
func isPunctToken(t string) bool { return len(t) == 1 && isPunct(t[0]) }

func (p *parser) expectString(what string) (string, error) {
	if p.done() || !p.toks[p.pos].quoted {
		return "", p.errHere("expected " + what + " in double quotes")
	}
	s, _ := unquote(p.next().text)
	return s, nil
}

func (p *parser) expectUint(what string, bits int) (uint64, error) {
	if p.done() {
		return 0, p.errHere("expected " + what)
	}
	n, err := strconv.ParseUint(p.peek(), 10, bits)
	if err != nil {
		return 0, p.errHere("expected " + what)
	}
	p.next()
	return n, nil
}

// selectorStart reports whether a word starts a selector.
func selectorStart(w string) bool {
	switch w {
	case "ip", "ip6", "tcp", "udp", "sctp", "th", "meta", "iifname", "oifname", "ct", "icmpv6":
		return true
	}
	return false
}

func (p *parser) stmt(r *ruleAST) (stmt, error) {
	w := p.peek()
	switch {
	case w == "meta" && p.peekAt(1) == "mark" && p.peekAt(2) == "set":
		p.pos += 3
		t, err := p.expectWord("mark value")
		if err != nil {
			return nil, err
		}
		v, err := parseValue(TypeMark, t.text)
		if err != nil {
			return nil, p.errAt(t, err.Error())
		}
		return &markSetStmt{val: v}, nil
	case selectorStart(w):
		return p.match(r)
	case w == "counter":
		p.next()
		c := &counterStmt{}
		if p.peek() == "packets" {
			p.next()
			var err error
			if c.packets, err = p.expectUint("packet count", 64); err != nil {
				return nil, err
			}
			if err := p.expect("bytes", "bytes"); err != nil {
				return nil, err
			}
			if c.bytes, err = p.expectUint("byte count", 64); err != nil {
				return nil, err
			}
		}
		return c, nil
	case w == "log":
		return p.log()
	case w == "limit":
		return p.limit()
	case w == "reject":
		return p.reject()
	case w == "snat" || w == "dnat":
		return p.nat()
	case w == "masquerade":
		p.next()
		return masqStmt{}, nil
	case w == "notrack":
		p.next()
		return notrackStmt{}, nil
	case w == "accept" || w == "drop" || w == "return" || w == "continue" || w == "jump" || w == "goto":
		return p.verdict()
	}
	return nil, p.errHere("expected a match, statement or verdict")
}

func (p *parser) verdict() (*verdictStmt, error) {
	t := p.next()
	switch t.text {
	case "accept":
		return &verdictStmt{kind: nftwire.VerdictAccept}, nil
	case "drop":
		return &verdictStmt{kind: nftwire.VerdictDrop}, nil
	case "return":
		return &verdictStmt{kind: nftwire.VerdictReturn}, nil
	case "continue":
		return &verdictStmt{kind: nftwire.VerdictContinue}, nil
	case "jump", "goto":
		c, err := p.expectWord("chain name")
		if err != nil {
			return nil, err
		}
		if !validIdent(c.text) {
			return nil, p.errAt(c, "invalid chain name")
		}
		k := nftwire.VerdictJump
		if t.text == "goto" {
			k = nftwire.VerdictGoto
		}
		return &verdictStmt{kind: k, chain: c.text}, nil
	}
	return nil, p.errAt(t, "expected a verdict")
}

// validIdent accepts the identifiers nft accepts unquoted for chain and
// set names (and that it prints back unquoted). It is the one definition:
// CheckName explains its refusals, and the compilers' test checker uses
// CheckName too, so tests hold names to what production accepts.
func validIdent(s string) bool {
	if s == "" || len(s) > MaxNameLen {
		return false
	}
	for i, c := range s {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if i == 0 && !letter {
			return false
		}
		if !letter && !(c >= '0' && c <= '9') && c != '_' && c != '-' && c != '.' && c != '/' {
			return false
		}
	}
	return !isKeyword(s)
}

// isKeyword: nft's scanner turns these into keywords, so they cannot name
// a chain or set without quoting, which this subset does not support.
func isKeyword(s string) bool {
	switch s {
	case "accept", "drop", "return", "continue", "jump", "goto", "ip", "ip6", "tcp", "udp", "sctp", "th",
		"meta", "ct", "counter", "log", "limit", "reject", "snat", "dnat", "masquerade", "notrack",
		"comment", "map", "vmap", "set", "table", "chain", "rule", "element", "inet", "to", "with", "icmpv6":
		return true
	}
	return false
}

// selector parses `ip saddr`, `meta l4proto`, `iifname`, ...
func (p *parser) selector() (*field, error) {
	t := p.next()
	switch t.text {
	case "iifname", "oifname":
		return fields[t.text], nil
	}
	want := secondWords(t.text)
	if want == nil {
		return nil, p.errAt(t, "expected a selector")
	}
	if !p.done() && !p.toks[p.pos].quoted {
		k := p.peek()
		for _, w := range want {
			if k == w.word {
				p.next()
				return w.f, nil
			}
		}
	}
	words := make([]string, len(want))
	for i, w := range want {
		words[i] = w.word
	}
	return nil, p.errHere("expected " + strings.Join(words, " or "))
}

// selectorWord is a second word of a selector and the field it selects.
type selectorWord struct {
	word string
	f    *field
}

func selectorWords(first string, second ...string) []selectorWord {
	out := make([]selectorWord, len(second))
	for i, w := range second {
		name := first + " " + w
		if first == "meta" && (w == "iifname" || w == "oifname") {
			name = w
		}
		out[i] = selectorWord{w, fields[name]}
	}
	return out
}

// The read-only second words of each two-word selector, in the order an
// error lists them.
var (
	ipWords   = selectorWords("ip", "saddr", "daddr", "protocol")
	ip6Words  = selectorWords("ip6", "saddr", "daddr", "nexthdr", "hoplimit")
	tcpWords  = selectorWords("tcp", "dport", "sport")
	udpWords  = selectorWords("udp", "dport", "sport")
	sctpWords = selectorWords("sctp", "dport", "sport")
	thWords   = selectorWords("th", "dport", "sport")
	metaWords = selectorWords("meta", "l4proto", "nfproto", "mark", "iifname", "oifname")
	ctWords   = selectorWords("ct", "state", "mark")

	icmp6Words = selectorWords("icmpv6", "type")
)

// secondWords returns the second words a selector's first word takes, nil
// when it starts no two-word selector.
func secondWords(first string) []selectorWord {
	switch first {
	case "ip":
		return ipWords
	case "ip6":
		return ip6Words
	case "tcp":
		return tcpWords
	case "udp":
		return udpWords
	case "sctp":
		return sctpWords
	case "th":
		return thWords
	case "meta":
		return metaWords
	case "ct":
		return ctWords
	case "icmpv6":
		return icmp6Words
	}
	return nil
}

func (p *parser) match(r *ruleAST) (stmt, error) {
	start := p.toks[p.pos]
	f, err := p.selector()
	if err != nil {
		return nil, err
	}
	m := r.newMatch()
	m.fieldBuf[0] = f
	fs := m.fieldBuf[:1]
	for p.peek() == "." {
		p.next()
		if !selectorStart(p.peek()) {
			return nil, p.errHere("expected a selector after \".\"")
		}
		f, err := p.selector()
		if err != nil {
			return nil, err
		}
		fs = append(fs, f)
	}
	if len(fs) > 1 {
		for _, f := range fs {
			if f.dt.Name == "ct_state" || f.dt.Name == "nfproto" {
				return nil, p.errAt(start, f.name+" cannot be concatenated")
			}
		}
	}
	if p.peek() == "vmap" {
		p.next()
		return p.vmap(fs)
	}
	m.fields = fs
	if p.peek() == "&" {
		if len(fs) > 1 || fs[0].dt.Name != "mark" {
			return nil, p.errHere("a mask applies only to meta mark or ct mark")
		}
		p.next()
		t, err := p.expectWord("mask")
		if err != nil {
			return nil, err
		}
		if m.mask, err = parseValue(TypeMark, t.text); err != nil {
			return nil, p.errAt(t, err.Error())
		}
		if op := p.peek(); op != "==" && op != "!=" {
			return nil, p.errHere("expected == or != after the mask")
		}
	}
	switch p.peek() {
	case "==":
		p.next()
	case "!=":
		p.next()
		m.neq = true
	case "!":
		if fs[0].dt.Name != "ct_state" {
			return nil, p.errHere("use != to negate")
		}
		p.next()
		m.neq = true
	}
	if fs[0].dt.Name == "ct_state" {
		return m, p.ctState(m)
	}
	if p.done() {
		return nil, p.errHere("expected a value, a set or @name")
	}
	switch w := p.peek(); {
	case w == "{":
		elems, err := p.setBody(Type{Fields: dts(fs)}, false)
		if err != nil {
			return nil, err
		}
		m.rhs = operand{kind: opSet, elems: elems}
	case w == "@":
		p.next()
		n, err := p.expectWord("set name")
		if err != nil {
			return nil, err
		}
		m.rhs = operand{kind: opNamedSet, name: n.text}
	default:
		if len(fs) > 1 {
			return nil, p.errHere("a concatenation matches only a set or @name")
		}
		t := p.next()
		o, err := parseOperand(fs[0].dt, t.text)
		if err != nil {
			return nil, p.errAt(t, err.Error())
		}
		if m.mask != nil && o.kind != opValue {
			return nil, p.errAt(t, "a masked match takes a single value")
		}
		m.rhs = o
	}
	return m, nil
}

func dts(fs []*field) []DataType {
	out := make([]DataType, len(fs))
	for i, f := range fs {
		out[i] = f.dt
	}
	return out
}

// parseOperand parses a value, prefix, range or ifname wildcard.
func parseOperand(dt DataType, s string) (operand, error) {
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
		v, err := parseValue(dt, s)
		return operand{kind: opValue, val: v}, err
	}
	k, err := parseKeyPart(dt, s)
	if err != nil {
		return operand{}, err
	}
	return k, nil
}

// parseKeyPart parses one (possibly interval) element of a datatype:
// value, "a/len" (addresses), "a-b".
func parseKeyPart(dt DataType, s string) (operand, error) {
	if i := strings.IndexByte(s, '/'); i >= 0 && dt.hasPrefixForm() {
		v, err := parseValue(dt, s[:i])
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
	// A text that parses as one value is one, even if it contains a dash
	// (protocol names like "ipv6-icmp"); see dashAt.
	v, err := parseValue(dt, s)
	if err == nil {
		return operand{kind: opValue, val: v}, nil
	}
	if i := dashAt(s); i > 0 {
		lo, err := parseValue(dt, s[:i])
		if err != nil {
			return operand{}, err
		}
		hi, err := parseValue(dt, s[i+1:])
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
	if i := strings.IndexByte(s, '-'); i >= 0 && nameLen(s) > i {
		return operand{}, errorf("invalid %s %q: nft reads it as one name, not a range of names", dt.Name, s)
	}
	return operand{kind: opValue}, err
}

// dashAt finds the '-' separating a range in a text that does not parse
// as one value (protocol names like "ipv6-icmp" contain one, so the whole
// text is tried as a value first, see parseKeyPart). Like nft's scanner, a
// word that starts with a letter reads as one name across dashes
// ("tcp-udp" is a name, never a range of names; nft refuses it as
// unknown), while an address such as "fd00::1-fd00::ff" stops the name at
// its colon.
func dashAt(s string) int {
	i := strings.IndexByte(s, '-')
	if i >= 0 && nameLen(s) > i {
		return -1
	}
	return i
}

// nameLen is the length of the name nft's scanner reads at the start of s
// (its "string" token: a letter, '_' or '.', then letters, digits, '/',
// '-', '_' or '.'), 0 when s does not start with one.
func nameLen(s string) int {
	isLetter := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	if s == "" || !(isLetter(s[0]) || s[0] == '_' || s[0] == '.') {
		return 0
	}
	n := 1
	for n < len(s) {
		c := s[n]
		if !(isLetter(c) || c >= '0' && c <= '9' || strings.IndexByte("/-_.", c) >= 0) {
			break
		}
		n++
	}
	return n
}

func (p *parser) ctState(m *matchStmt) error {
	if m.neq {
		// nft compiles `ct state != x` as an exact compare but lists it
		// like a bitmask test; refuse rather than write something that
		// does not round-trip.
		return p.errAt(p.toks[p.pos-1], "negated ct state is not supported")
	}
	if m.mask != nil {
		return p.errHere("ct state takes no mask")
	}
	for {
		t, err := p.expectWord("ct state name")
		if err != nil {
			return err
		}
		found := false
		for _, s := range ctStateBits {
			if s.name == t.text {
				m.rhs.flags |= s.bit
				found = true
			}
		}
		if !found {
			return p.errAt(t, "expected invalid, established, related, new or untracked")
		}
		if p.peek() != "," {
			break
		}
		p.next()
	}
	m.rhs.kind = opFlags
	return nil
}

// setBody parses `{ elem, elem }`; with withValues, each element is
// `key : verdict`.
func (p *parser) setBody(key Type, withValues bool) ([]ElementText, error) {
	if err := p.expect("{", "{"); err != nil {
		return nil, err
	}
	var out []ElementText
	for {
		if p.peek() == "}" && len(out) == 0 {
			return nil, p.errHere("an anonymous set needs at least one element")
		}
		var parts []string
		for i := range key.Fields {
			if i > 0 {
				if err := p.expect(".", "\".\" (concatenation has "+strconv.Itoa(len(key.Fields))+" fields)"); err != nil {
					return nil, err
				}
			}
			t, err := p.expectWord("set element")
			if t.quoted || (err != nil && !p.done() && p.toks[p.pos].quoted) {
				t = p.next()
				err = nil
			}
			if err != nil {
				return nil, err
			}
			if _, err := parseKeyPart(key.Fields[i], t.text); err != nil {
				return nil, p.errAt(t, err.Error())
			}
			parts = append(parts, t.text)
		}
		e := ElementText{Key: strings.Join(parts, " . ")}
		if withValues {
			if err := p.expect(":", "\":\" and a verdict"); err != nil {
				return nil, err
			}
			v, err := p.verdictWords()
			if err != nil {
				return nil, err
			}
			e.Value = v
		}
		out = append(out, e)
		if p.peek() == "," {
			p.next()
			continue
		}
		if err := p.expect("}", "\",\" or \"}\""); err != nil {
			return nil, err
		}
		return out, nil
	}
}

func (p *parser) verdictWords() (string, error) {
	switch p.peek() {
	case "accept", "drop", "return", "continue", "jump", "goto":
		v, err := p.verdict()
		if err != nil {
			return "", err
		}
		return v.String(), nil
	}
	return "", p.errHere("expected a verdict")
}

func (p *parser) vmap(fs []*field) (stmt, error) {
	v := &vmapStmt{fields: fs}
	if p.peek() == "@" {
		p.next()
		n, err := p.expectWord("map name")
		if err != nil {
			return nil, err
		}
		v.name = n.text
		return v, nil
	}
	elems, err := p.setBody(Type{Fields: dts(fs)}, true)
	if err != nil {
		return nil, err
	}
	v.elems = elems
	return v, nil
}

func (p *parser) log() (stmt, error) {
	p.next()
	l := &logStmt{}
	for {
		switch p.peek() {
		case "prefix":
			if l.hasPrefix {
				return nil, p.errHere("prefix given twice")
			}
			p.next()
			s, err := p.expectString("log prefix")
			if err != nil {
				return nil, err
			}
			if len(s) > MaxLogPrefixLen {
				return nil, p.errAt(p.toks[p.pos-1], "log prefix longer than "+strconv.Itoa(MaxLogPrefixLen)+" bytes")
			}
			l.prefix, l.hasPrefix = s, true
		case "group":
			if l.hasGroup {
				return nil, p.errHere("group given twice")
			}
			p.next()
			g, err := p.expectUint("log group number", 16)
			if err != nil {
				return nil, err
			}
			l.group, l.hasGroup = uint16(g), true
		default:
			return l, nil
		}
	}
}

func (p *parser) limit() (stmt, error) {
	p.next()
	if err := p.expect("rate", "rate"); err != nil {
		return nil, err
	}
	l := &limitStmt{burst: defaultBurst}
	if p.peek() == "over" {
		p.next()
		l.over = true
	}
	t, err := p.expectWord("rate such as 10/second")
	if err != nil {
		return nil, err
	}
	num, unit, ok := strings.Cut(t.text, "/")
	n, perr := strconv.ParseUint(num, 10, 64)
	if !ok || perr != nil || n == 0 {
		return nil, p.errAt(t, "expected rate such as 10/second")
	}
	l.rate = n
	for _, u := range limitUnits {
		if u.name == unit {
			l.unit = u.unit
		}
	}
	if l.unit == 0 {
		return nil, p.errAt(t, "expected unit second, minute, hour, day or week")
	}
	if p.peek() == "burst" {
		p.next()
		b, err := p.expectUint("burst", 32)
		if err != nil {
			return nil, err
		}
		if err := p.expect("packets", "packets"); err != nil {
			return nil, err
		}
		l.burst, l.hasBurst = uint32(b), true
	}
	return l, nil
}

func (p *parser) reject() (stmt, error) {
	p.next()
	r := &rejectStmt{}
	if p.peek() != "with" {
		return r, nil
	}
	p.next()
	kind, err := p.expectWord("icmp, icmpv6, icmpx or tcp")
	if err != nil {
		return nil, err
	}
	switch kind.text {
	case "tcp":
		if err := p.expect("reset", "reset"); err != nil {
			return nil, err
		}
		r.kind = "tcp"
		return r, nil
	case "icmp", "icmpv6", "icmpx":
	default:
		return nil, p.errAt(kind, "expected icmp, icmpv6, icmpx or tcp")
	}
	if p.peek() == "type" {
		p.next()
	}
	t, err := p.expectWord("reject type")
	if err != nil {
		return nil, err
	}
	found := false
	for _, c := range rejectCodes[kind.text] {
		if c.name == t.text {
			r.kind, r.code, found = kind.text, c.code, true
		}
	}
	if !found {
		return nil, p.errAt(t, "unknown "+kind.text+" reject type")
	}
	if r.kind == "icmpx" && r.code == 1 {
		// nft lists icmpx port-unreachable, the inet default, as plain reject.
		r.kind, r.code = "", 0
	}
	return r, nil
}

func (p *parser) nat() (stmt, error) {
	s := &natStmt{dnat: p.next().text == "dnat"}
	fam, err := p.expectWord("ip or ip6")
	if err != nil {
		return nil, err
	}
	dt := TypeIPv4Addr
	switch fam.text {
	case "ip":
		s.nfproto = nfprotoIPv4
	case "ip6":
		s.nfproto, dt = nfprotoIPv6, TypeIPv6Addr
	default:
		return nil, p.errAt(fam, "expected ip or ip6 (an inet table needs the address family)")
	}
	if err := p.expect("to", "to"); err != nil {
		return nil, err
	}
	if selectorStart(p.peek()) {
		if s.dnat {
			return nil, p.errHere("dnat to a map is not supported")
		}
		f, err := p.selector()
		if err != nil {
			return nil, err
		}
		fs := []*field{f}
		for p.peek() == "." {
			p.next()
			f, err := p.selector()
			if err != nil {
				return nil, err
			}
			fs = append(fs, f)
		}
		if err := p.expect("map", "map"); err != nil {
			return nil, err
		}
		if err := p.expect("@", "@name (anonymous address maps are not supported)"); err != nil {
			return nil, err
		}
		n, err := p.expectWord("map name")
		if err != nil {
			return nil, err
		}
		s.mapFields, s.mapName = fs, n.text
		return s, nil
	}
	t, err := p.expectWord("address")
	if err != nil {
		return nil, err
	}
	addr := t.text
	if s.dnat {
		var port string
		if addr, port, err = splitAddrPort(addr, s.nfproto == nfprotoIPv6); err != nil {
			return nil, p.errAt(t, err.Error())
		}
		if port != "" {
			n, err := strconv.ParseUint(port, 10, 16)
			if err != nil {
				return nil, p.errAt(t, fmt.Sprintf("port %q is not a number from 0 to 65535", port))
			}
			s.port = []byte{byte(n >> 8), byte(n)}
		}
	}
	if s.addr, err = parseValue(dt, addr); err != nil {
		return nil, p.errAt(t, err.Error())
	}
	return s, nil
}

// splitAddrPort splits a dnat target as nft writes it: ADDR or ADDR:PORT
// for IPv4, ADDR, [ADDR] or [ADDR]:PORT for IPv6. Port ranges, prefixes
// and address ranges are not supported.
func splitAddrPort(s string, v6 bool) (addr, port string, err error) {
	if !v6 {
		addr, port, _ = strings.Cut(s, ":")
		if strings.Contains(s, ":") && port == "" {
			return "", "", fmt.Errorf("empty port")
		}
		return addr, port, nil
	}
	if !strings.HasPrefix(s, "[") {
		return s, "", nil
	}
	addr, rest, ok := strings.Cut(s[1:], "]")
	switch {
	case !ok:
		return "", "", fmt.Errorf("missing ]")
	case rest == "":
		return addr, "", nil
	case !strings.HasPrefix(rest, ":") || rest == ":":
		return "", "", fmt.Errorf("expected :PORT after ]")
	}
	return addr, rest[1:], nil
}
