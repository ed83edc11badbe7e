// Package nftsafe turns strings that come from tenant input (object names,
// namespaces, keys) into chain and set names and comments the kernel accepts
// and nft prints and reads back unchanged, so that the compilers never emit
// per object what would otherwise make the kernel refuse the whole batch.
// What the kernel and nft accept is engine/nftsyntax's (CheckName,
// CheckComment); the compilers' tests hold whole tables to it with
// internal/nftcheck.
//
// Every tenant-derived string that reaches a name goes through NamePart (and
// the whole name through Name); every one that reaches a comment goes
// through Comment.
package nftsafe

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/nftguard/nftguard/engine/nftsyntax"
)

// MaxName keeps chain and set names well inside the kernel's limit
// (NFT_NAME_MAXLEN, 256 bytes with the terminating NUL), leaving room for
// suffixes callers add after Name (e.g. "_allowed4").
const MaxName = 200

// MaxComment is the longest comment nft accepts, in bytes.
const MaxComment = nftsyntax.MaxCommentLen

// NamePart returns s when it is a valid Kubernetes object name (a DNS-1123
// subdomain: lowercase letters, digits, '-' and '.', starting and ending
// with a letter or digit, at most 253 bytes), which is always a valid part
// of an nft identifier and never contains the '_' used to join parts.
// Anything else (only possible without an API server's validation, e.g. a
// hand-written manifest) becomes "X" and a hash of s: uppercase never occurs
// in a valid name, so the result cannot collide with one, and the object is
// still enforced under a name nft can print and read.
func NamePart(s string) string {
	if validName(s) {
		return s
	}
	h := sha256.Sum256([]byte(s))
	return "X" + hex.EncodeToString(h[:8])
}

func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' || c == '.':
			if i == 0 || i == len(s)-1 {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// Name bounds a name built from parts that went through NamePart: one
// longer than MaxName is cut and ends in a hash of the whole, so distinct
// long names stay distinct.
func Name(s string) string {
	if len(s) <= MaxName {
		return s
	}
	h := sha256.Sum256([]byte(s))
	return s[:MaxName-17] + "_" + hex.EncodeToString(h[:8])
}

// Comment makes s a comment nft accepts and prints back unchanged: bytes
// outside printable ASCII, and '"' and '\' (nft's quoted strings have no
// escapes, and renderers that quote with escapes would write a backslash
// nft keeps), become '?'; then it is clipped to MaxComment bytes. Comments
// are for people: a readable approximation beats a refused batch.
func Comment(s string) string {
	if commentOK(s) {
		return nftsyntax.ClipComment(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s) && b.Len() <= MaxComment; i++ {
		c := s[i]
		if !commentByte(c) {
			if c >= 0x80 {
				// One '?' per rune, not per byte.
				for i+1 < len(s) && s[i+1]&0xC0 == 0x80 {
					i++
				}
			}
			c = '?'
		}
		b.WriteByte(c)
	}
	return nftsyntax.ClipComment(b.String())
}

func commentByte(c byte) bool {
	return c >= 0x20 && c <= 0x7e && c != '"' && c != '\\'
}

func commentOK(s string) bool {
	for i := 0; i < len(s); i++ {
		if !commentByte(s[i]) {
			return false
		}
	}
	return true
}
