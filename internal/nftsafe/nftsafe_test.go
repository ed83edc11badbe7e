package nftsafe

import (
	"strings"
	"testing"

	"github.com/nftguard/nftguard/engine/nftsyntax"
)

func TestNamePart(t *testing.T) {
	for _, tc := range []struct {
		in   string
		keep bool
	}{
		{"web", true}, {"a.b-c", true}, {"0x1", true},
		{"", false}, {"-a", false}, {"a-", false}, {"A", false}, {"a_b", false},
		{`q"; }; }; flush ruleset; table inet nftguard { chain zz { #`, false},
		{"é", false}, {strings.Repeat("a", 254), false},
	} {
		got := NamePart(tc.in)
		if (got == tc.in) != tc.keep {
			t.Errorf("NamePart(%q) = %q, keep = %v", tc.in, got, tc.keep)
		}
		if err := nftsyntax.CheckName("np_" + got); err != nil {
			t.Errorf("NamePart(%q) = %q: not an identifier part: %v", tc.in, got, err)
		}
	}
	if NamePart("a_b") == NamePart("a_c") {
		t.Error("different invalid names share a part")
	}
}

func TestComment(t *testing.T) {
	for in, want := range map[string]string{
		"ns/pod ingress[0]":      "ns/pod ingress[0]",
		`a"b\c`:                  "a?b?c",
		"a\nb\x00c\x7f":          "a?b?c?",
		"día":                    "d?a",
		strings.Repeat("é", 200): strings.Repeat("?", 125) + "...",
	} {
		got := Comment(in)
		if got != want {
			t.Errorf("Comment(%q) = %q, want %q", in, got, want)
		}
		if len(got) > MaxComment || !commentOK(got) {
			t.Errorf("Comment(%q) = %q is not a safe comment", in, got)
		}
	}
}
