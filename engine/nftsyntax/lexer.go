package nftsyntax

import (
	"fmt"
	"strings"
)

// token is one lexical unit of a rule with its 1-based column.
type token struct {
	text string
	col  int
	// quoted is true for a "string" token; text then keeps its quotes.
	quoted bool
}

// punctuation splits words even without surrounding blanks; '.' and ':'
// are not here because they occur inside addresses, so the concatenation
// and map operators must be written with blanks around them (as nft
// prints them).
const punctuation = "{},@&;"

// lex splits a rule into tokens, appended to toks (the caller's buffer, so
// that a short rule needs no allocation). Words run until a blank or
// punctuation; "==" and "!=" are words of their own when blank-separated.
func lex(text string, toks []token) ([]token, error) {
	i := 0
	for i < len(text) {
		c := text[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case c == '\n' || c == '\r':
			return nil, &SyntaxError{Col: i + 1, Token: "newline", Reason: "a rule is one line"}
		case c == '"':
			j := strings.IndexByte(text[i+1:], '"')
			if j < 0 {
				return nil, &SyntaxError{Col: i + 1, Token: text[i:], Reason: "unterminated string"}
			}
			// nft's strings are printable text: a control character
			// (NUL above all, which ends the string in the kernel)
			// would not survive the round trip.
			for k := i + 1; k <= i+j; k++ {
				if isControl(text[k]) {
					return nil, &SyntaxError{Col: k + 1, Token: text[k : k+1], Reason: "control character in string"}
				}
			}
			toks = append(toks, token{text: text[i : i+j+2], col: i + 1, quoted: true})
			i += j + 2
		case isControl(c):
			return nil, &SyntaxError{Col: i + 1, Token: text[i : i+1], Reason: "control character"}
		case isPunct(c):
			toks = append(toks, token{text: text[i : i+1], col: i + 1})
			i++
		default:
			j := i
			for j < len(text) && !endsWord(text[j]) {
				j++
			}
			toks = append(toks, token{text: text[i:j], col: i + 1})
			i = j
		}
	}
	return toks, nil
}

// isPunct reports whether c is one of punctuation.
func isPunct(c byte) bool {
	switch c {
	case '{', '}', ',', '@', '&', ';':
		return true
	}
	return false
}

// endsWord reports whether c ends a word: a blank, a control character
// (tab included), a quote or punctuation.
func endsWord(c byte) bool { return c == ' ' || c == '"' || isControl(c) || isPunct(c) }

// isControl reports an ASCII control character (tab is a blank between
// tokens, never part of one).
func isControl(c byte) bool { return c < 0x20 || c == 0x7f }

// hasControl reports whether s contains an ASCII control character.
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if isControl(s[i]) {
			return true
		}
	}
	return false
}

// SyntaxError is a parse error at a column of the rule text.
type SyntaxError struct {
	Col    int    // 1-based byte column; 0 means end of input
	Token  string // offending token ("" at end of input)
	Reason string
}

func (e *SyntaxError) Error() string {
	if e.Token == "" {
		return fmt.Sprintf("col %d: unexpected end of rule: %s", e.Col, e.Reason)
	}
	return fmt.Sprintf("col %d: unexpected %q: %s", e.Col, e.Token, e.Reason)
}
