package nftsyntax

import (
	"strings"
	"testing"
)

// The lexer classifies bytes with switches; they must say what the
// punctuation constant says, and a word ends at a control byte, a space,
// a quote or punctuation.
func TestLexByteClasses(t *testing.T) {
	for c := 0; c < 256; c++ {
		b := byte(c)
		if isPunct(b) != (strings.IndexByte(punctuation, b) >= 0) {
			t.Errorf("isPunct(%q) = %v", b, isPunct(b))
		}
		oldEnd := isControl(b) || strings.ContainsRune(" \""+punctuation, rune(b))
		if endsWord(b) != oldEnd {
			t.Errorf("endsWord(%q) = %v, want %v", b, endsWord(b), oldEnd)
		}
	}
	// Tokens as lex makes them: one punctuation byte, or a word without any.
	for _, s := range []string{"", "{", "}", ",", "@", "&", ";", "ip", "\"x\"", "=="} {
		if isPunctToken(s) != (s != "" && strings.Contains(punctuation, s)) {
			t.Errorf("isPunctToken(%q) = %v", s, isPunctToken(s))
		}
	}
}
