package manifest

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

// aliasBomb is a document of a kind nftguard ignores with one string of
// size bytes anchored and aliased n times.
func aliasBomb(size, n int) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\ndata:\n  a: &a \"")
	b.WriteString(strings.Repeat("x", size))
	b.WriteString("\"\n  b: [")
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("*a")
	}
	b.WriteString("]\n")
	return b.String()
}

// laughs is the nested form: each level a list of nine aliases of the
// level below, so the expansion is 9^levels times the first string.
func laughs(levels int) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: laughs}\ndata:\n  l0: &l0 lol\n")
	for i := 1; i <= levels; i++ {
		prev := "*l" + string(rune('0'+i-1))
		b.WriteString("  l" + string(rune('0'+i)) + ": &l" + string(rune('0'+i)) + " [" + strings.Repeat(prev+",", 8) + prev + "]\n")
	}
	return b.String()
}

func TestExpandedTooMuch(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		want string // a substring of the reason, "" for accepted
	}{
		{"no alias", ns, ""},
		{"a star that is no alias", "metadata: {name: x, annotations: {a: \"*.example.com\"}}\n", ""},
		{"honest anchors", "metadata:\n  labels: &l {app: web, tier: front, team: shop}\nspec:\n  podSelector: {matchLabels: *l}\n" +
			"  ingress:\n  - from: [{podSelector: {matchLabels: *l}}, {podSelector: {matchLabels: *l}}]\n", ""},
		{"merge key", "base: &b {a: 1, b: 2}\nc:\n  <<: *b\n  d: 3\n", ""},
		{"string aliased 2,000 times", aliasBomb(1000, 2000), "YAML aliases would expand this"},
		{"nested laughs", laughs(9), "YAML aliases would expand this"},
		{"nested, but little", laughs(2), ""},
		{"unknown anchor", "a: *nope\n", "not valid YAML: "},
		{"alias inside its own anchor", "a: &x [1, *x]\n", "not valid YAML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := expandedTooMuch([]byte(tc.doc))
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("expandedTooMuch = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestLoadAliasBomb reads the bomb in a kind nftguard ignores, after a
// valid document: the input is unreadable at FILE:2, and refused before
// anything is expanded, so reading it allocates no more than reading a
// document of the same shape without aliases (a list of 10,000 numbers):
// what the YAML parser costs for the input as written. (The full-size
// bomb, 311 KB that would expand to a gigabyte, is run by the CLI's test in
// a child process under an address-space limit.)
func TestLoadAliasBomb(t *testing.T) {
	const n = 10000
	bomb := aliasBomb(1000, n) // 31 KB, 10 MB expanded
	plain := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}\ndata:\n  b: [" + strings.Repeat("1,", n-1) + "1]\n"
	load := func(doc string) (uint64, error) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, _, err := Load(strings.NewReader(ns+"---\n"+doc), "-")
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc, err
	}
	alloc, err := load(bomb)
	var ie *InputError
	if !errors.As(err, &ie) || len(ie.Problems) != 1 {
		t.Fatalf("Load: %v, want an InputError with one problem", err)
	}
	if p := ie.Problems[0]; p.Source != "-:2" || !strings.Contains(p.Reason, "YAML aliases would expand") {
		t.Errorf("problem %+v, want -:2 and the expansion named", p)
	}
	plainAlloc, err := load(plain)
	if err != nil {
		t.Fatalf("Load of the list without aliases: %v", err)
	}
	t.Logf("bomb: %d bytes read, %d allocated; the same list without aliases: %d bytes read, %d allocated", len(bomb), alloc, len(plain), plainAlloc)
	if alloc > 2*plainAlloc {
		t.Errorf("reading the bomb allocated %d bytes, more than twice the %d of reading the same list without aliases", alloc, plainAlloc)
	}
}
