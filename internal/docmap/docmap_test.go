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
// comment), and for a doc.go without a package comment.
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
		missing, err := unmapped(filepath.Dir(path))
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return nil
		}
		if len(missing) > 0 {
			t.Errorf("%s does not name %s in its package comment: add each to the file map", rel, strings.Join(missing, ", "))
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

// unmapped returns the non-test .go files of dir that dir/doc.go's package
// comment does not name.
func unmapped(dir string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, "doc.go"), nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil {
		return nil, err
	}
	if f.Doc == nil {
		return nil, errNoComment
	}
	doc := f.Doc.Text()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") || n == "doc.go" {
			continue
		}
		if !regexp.MustCompile(`(^|[^\w.-])` + regexp.QuoteMeta(n) + `\b`).MatchString(doc) {
			missing = append(missing, n)
		}
	}
	return missing, nil
}

type docError string

func (e docError) Error() string { return string(e) }

const errNoComment = docError("no package comment")
