package nftsyntax

import (
	"strings"
	"testing"

	"github.com/nftguard/nftguard/engine/nftwire"
)

// TestRenderRefusesUnquotableStrings: a rule read from the kernel whose
// comment or log prefix nft could not read back inside quotes (someone
// wrote it over netlink) is refused, not rendered as broken text.
func TestRenderRefusesUnquotableStrings(t *testing.T) {
	for _, comment := range []string{`a" } table ip x { "`, "a\nb", "a\x01"} {
		c := &Compiled{
			Exprs:    []nftwire.Expr{&nftwire.Verdict{Kind: nftwire.VerdictAccept}},
			UserData: nftwire.Comment(nftwire.UdataRuleComment, comment),
		}
		if text, err := RenderRule(inet, c, testSets()); err == nil {
			t.Errorf("comment %q rendered as %q", comment, text)
		}
	}
	c := &Compiled{Exprs: []nftwire.Expr{
		&nftwire.Log{Key: 1 << 2, Data: []byte(`x" accept; "`)}, // NFTA_LOG_PREFIX
		&nftwire.Verdict{Kind: nftwire.VerdictAccept},
	}}
	if text, err := RenderRule(inet, c, testSets()); err == nil {
		t.Errorf("log prefix with a quote rendered as %q", text)
	}
}

func TestCheckNameAndComment(t *testing.T) {
	for _, ok := range []string{"a", "pod-a", "np_ingress4", "s.1/x-y_z", strings.Repeat("a", 255)} {
		if err := CheckName(ok); err != nil {
			t.Errorf("CheckName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a b", "a{", "a;", "a\n", "1a", "accept", strings.Repeat("a", 256), `a"`} {
		if err := CheckName(bad); err == nil {
			t.Errorf("CheckName(%q) passed", bad)
		}
	}
	for _, ok := range []string{"", "a } table ip x { ; # $ @ \\", "ü", strings.Repeat("a", MaxCommentLen)} {
		if err := CheckComment(ok); err != nil {
			t.Errorf("CheckComment(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{`a"b`, "a\nb", "a\x00", "a\tb", "a\x7f", strings.Repeat("a", MaxCommentLen+1)} {
		if err := CheckComment(bad); err == nil {
			t.Errorf("CheckComment(%q) passed", bad)
		}
	}
}
