package nftsyntax

import (
	"errors"
	"fmt"
)

// The strings nft reads back as they were written. nft's quoted strings
// have no escapes: a double quote ends one, and a control character (a
// newline above all, or a NUL, which ends the string in the kernel) does
// not survive the round trip. Names are printed unquoted, so they must be
// identifiers nft's scanner reads as one word. Whatever is rendered or sent
// is checked against these rules first, so that rendered text can never
// carry a second command or table.

// MaxNameLen is the longest table, chain or set name the kernel accepts,
// in bytes (NFT_NAME_MAXLEN counts the terminating NUL).
const MaxNameLen = 255

// MaxLogPrefixLen is the longest log prefix nft accepts, in bytes
// (NF_LOG_PREFIXLEN counts the terminating NUL).
const MaxLogPrefixLen = 127

// CheckName reports why s cannot name a table, chain or set: nft prints
// names unquoted, so only identifiers it reads back as one name (and not
// as a keyword) qualify, of at most 255 bytes (the kernel's
// NFT_NAME_MAXLEN counts the NUL).
func CheckName(s string) error {
	if validIdent(s) {
		return nil
	}
	switch {
	case s == "":
		return errors.New("empty name")
	case len(s) > MaxNameLen:
		return fmt.Errorf("name of %d bytes is longer than %d", len(s), MaxNameLen)
	case isKeyword(s):
		return fmt.Errorf("name %q is an nft keyword", s)
	}
	return fmt.Errorf("name %q is not an nft identifier (a letter, then letters, digits, '_', '-', '.', '/')", s)
}

// CheckComment reports why s cannot be a comment on a rule, chain or set:
// nft writes it in double quotes, without escapes, and accepts at most
// MaxCommentLen bytes.
func CheckComment(s string) error {
	if len(s) > MaxCommentLen {
		return fmt.Errorf("comment of %d bytes is longer than %d", len(s), MaxCommentLen)
	}
	return CheckQuoted(s)
}

// CheckQuoted reports why s cannot be written as an nft quoted string (a
// comment, a log prefix, an interface name).
func CheckQuoted(s string) error {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return fmt.Errorf("string %q contains a double quote, which nft cannot read inside a quoted string", s)
		case isControl(c):
			return fmt.Errorf("string %q contains control character %#02x, which nft cannot read back", s, c)
		}
	}
	return nil
}
