package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestFlagsDocumented: docs/cli.md has a section for every command, and its
// flag table names exactly the flags the command defines.
func TestFlagsDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	heading := regexp.MustCompile("^## `nftguard ([a-z-]+)`")
	row := regexp.MustCompile("^\\| `--?([a-z][a-z-]*)")
	doc := map[string][]string{}
	section := ""
	for _, line := range strings.Split(string(b), "\n") {
		if m := heading.FindStringSubmatch(line); m != nil {
			section = m[1]
			doc[section] = []string{}
			continue
		}
		if strings.HasPrefix(line, "## ") {
			section = ""
		}
		if m := row.FindStringSubmatch(line); m != nil && section != "" {
			doc[section] = append(doc[section], m[1])
		}
	}
	flagLine := regexp.MustCompile(`(?m)^  -([a-z][a-z-]*)`)
	for _, c := range commands() {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), []string{c.name, "-h"}, nil, &out, &errOut); code != exitOK {
			t.Fatalf("%s -h: exit %d: %s", c.name, code, errOut.String())
		}
		var defined []string
		for _, m := range flagLine.FindAllStringSubmatch(out.String(), -1) {
			defined = append(defined, m[1])
		}
		documented, ok := doc[c.name]
		if !ok {
			t.Errorf("docs/cli.md has no section \"## `nftguard %s`\"", c.name)
			continue
		}
		sort.Strings(defined)
		sort.Strings(documented)
		if !slices.Equal(defined, documented) {
			t.Errorf("nftguard %s: docs/cli.md documents flags %q, the command defines %q", c.name, documented, defined)
		}
		delete(doc, c.name)
	}
	for name := range doc {
		t.Errorf("docs/cli.md documents nftguard %s, which is no command", name)
	}
}
