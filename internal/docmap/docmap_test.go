package docmap

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocFileMaps fails for each package whose doc.go does not name one of
// the package's non-test .go files (as "name.go", anywhere in the package
// comment), whose file map names a file the package does not have (an
// indented line of the comment that starts with "name.go"), and for a
// doc.go without a package comment.
func TestDocFileMaps(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root %s: %v", root, err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() != "doc.go" {
			return nil
		}
		checked++
		rel, _ := filepath.Rel(root, path)
		missing, stale, err := unmapped(filepath.Dir(path))
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return nil
		}
		if len(missing) > 0 {
			t.Errorf("%s does not name %s in its package comment: add each to the file map", rel, strings.Join(missing, ", "))
		}
		if len(stale) > 0 {
			t.Errorf("%s maps %s, which the package does not have: remove or rename each in the file map", rel, strings.Join(stale, ", "))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatalf("no doc.go under %s", root)
	}
}

// mapLine is a line of a file map: a line of a code block of the package
// comment (gofmt indents them with a tab; lists' continuation lines with
// spaces) that starts with a Go file's name.
var mapLine = regexp.MustCompile(`(?m)^\t([\w.-]+\.go)(\s|$)`)

// unmapped returns the non-test .go files of dir that dir/doc.go's package
// comment does not name (missing), and the files its file map names that
// dir does not have (stale).
func unmapped(dir string) (missing, stale []string, err error) {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, "doc.go"), nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil {
		return nil, nil, err
	}
	if f.Doc == nil {
		return nil, nil, errNoComment
	}
	doc := f.Doc.Text()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	have := map[string]bool{}
	for _, e := range entries {
		n := e.Name()
		have[n] = !e.IsDir()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") || n == "doc.go" {
			continue
		}
		if !regexp.MustCompile(`(^|[^\w.-])` + regexp.QuoteMeta(n) + `\b`).MatchString(doc) {
			missing = append(missing, n)
		}
	}
	for _, m := range mapLine.FindAllStringSubmatch(doc, -1) {
		if !have[m[1]] {
			stale = append(stale, m[1])
		}
	}
	return missing, stale, nil
}

type docError string

func (e docError) Error() string { return string(e) }

const errNoComment = docError("no package comment")

// TestUnmapped: both directions, on a package written for the test.
func TestUnmapped(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"doc.go":    "// Package p does one thing.\n//\n//\tkept.go     named in the map\n//\tgone.go     deleted since\n//\t            (a continuation line, not a file: x.go)\n//\n//   - a list item whose text wraps onto\n//     other.go, a file of another package\n//\n// Prose may name an upstream file, helper.go, or a test, p_test.go.\npackage p\n",
		"kept.go":   "package p\n",
		"new.go":    "package p\n",
		"p_test.go": "package p\n",
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	missing, stale, err := unmapped(dir)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(missing, ",") != "new.go" || strings.Join(stale, ",") != "gone.go" {
		t.Errorf("missing %q, stale %q; want [new.go], [gone.go]", missing, stale)
	}
}
