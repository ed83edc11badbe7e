// Package golden compares test output with files under a package's
// testdata/, or rewrites them when the test binary runs with -update (each
// package declares its own flag and passes its value in).
package golden

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Check compares got with the file at path, line by line, or writes got to
// path when update is set. A difference is reported as a cmp.Diff
// (-golden +got).
func Check(t testing.TB, update bool, path, got string) {
	t.Helper()
	if update {
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
		t.Errorf("%s differs from the output (-golden +got); if the change is intended, run with -update and review the diff:\n%s", path, diff)
	}
}

// ReadSums reads a file of "NAME SUM" lines, for outputs pinned by their
// hash rather than their text; a missing file reads as empty when update
// is set.
func ReadSums(t testing.TB, update bool, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		if update && os.IsNotExist(err) {
			return nil
		}
		t.Fatalf("%v (run with -update to create it)", err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if name, sum, ok := strings.Cut(sc.Text(), " "); ok {
			out[name] = sum
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
