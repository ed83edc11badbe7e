package nftsyntax

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testdata/values.golden holds what parseValue and parseKeyPart make of
// every text of valueTexts for every datatype: the bytes, or the error
// word for word. A change of behaviour shows up as a diff of that file:
// run
//
//	go test ./engine/nftsyntax/ -run Golden -update
//
// and review the diff as part of the change.
var update = flag.Bool("update", false, "rewrite the golden files under testdata/ from the parsers' output")

// renderValues is one line per datatype and text: "TYPE TEXT: value
// RESULT; key part RESULT".
func renderValues(value func(DataType, string) ([]byte, error), keyPart func(DataType, string) (operand, error)) string {
	var b strings.Builder
	for _, dt := range valueTypes() {
		for _, s := range valueTexts {
			v, err := value(dt, s)
			vt := bytesText(v)
			if err != nil {
				vt += " error: " + err.Error()
			}
			o, err := keyPart(dt, s)
			ot := operandText(o)
			if err != nil {
				ot += " error: " + err.Error()
			}
			fmt.Fprintf(&b, "%s %q: value %s; key part %s\n", dt.Name, s, vt, ot)
		}
	}
	return b.String()
}

// bytesText tells nil from empty: a failed parse returns nil.
func bytesText(v []byte) string {
	if v == nil {
		return "nil"
	}
	return fmt.Sprintf("%x", v)
}

func operandText(o operand) string {
	kind := map[operandKind]string{opValue: "value", opPrefix: "prefix", opRange: "range"}[o.kind]
	if kind == "" {
		kind = fmt.Sprintf("kind(%d)", o.kind)
	}
	s := kind + " " + bytesText(o.val)
	if o.hi != nil {
		s += "-" + bytesText(o.hi)
	}
	if o.bits != 0 {
		s += fmt.Sprintf("/%d", o.bits)
	}
	if o.wildcard {
		s += " wildcard"
	}
	if o.elems != nil || o.name != "" || o.flags != 0 {
		s += fmt.Sprintf(" elems=%q name=%q flags=%#x", o.elems, o.name, o.flags)
	}
	return s
}

// checkGolden compares got with the golden file, or rewrites the file
// under -update.
func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(got, "\n")); diff != "" {
		t.Errorf("%s differs from the parsers' output (-golden +parsed); if the change is intended, run with -update and review the diff:\n%s", path, diff)
	}
}

// TestGoldenValues pins parseValue (with its dotted-quad fast path) and
// parseKeyPart (which parses a text as a value once, then as a range) on
// every edge of every datatype's literals.
func TestGoldenValues(t *testing.T) {
	checkGolden(t, filepath.Join("testdata", "values.golden"), renderValues(parseValue, parseKeyPart))
	// A value has no spare capacity that an append could share.
	for _, dt := range valueTypes() {
		for _, s := range valueTexts {
			if v, _ := parseValue(dt, s); cap(v) != len(v) {
				t.Errorf("parseValue(%s, %q) has spare capacity %d", dt.Name, s, cap(v)-len(v))
			}
		}
	}
}
