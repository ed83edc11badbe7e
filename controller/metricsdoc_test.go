package controller

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsDocumented: the Controller section of docs/operations.md
// lists exactly the metrics the controller registers, with their labels
// and types.
func TestMetricsDocumented(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := newMetrics(reg); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]string{}
	for _, mf := range mfs {
		var labels []string
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName())
			}
		}
		slices.Sort(labels)
		registered[mf.GetName()] = strings.Join(slices.Compact(labels), ",") + " " + strings.ToLower(mf.GetType().String())
	}

	f, err := os.Open(filepath.Join("..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// | `name` | `label`, `label` (or —) | type | meaning |
	row := regexp.MustCompile("^\\| `(nftguard_controller_[a-z0-9_]+)` \\| ([^|]*) \\| ([a-z]+) \\|")
	documented := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := row.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		var labels []string
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" && l != "—" {
				labels = append(labels, l)
			}
		}
		slices.Sort(labels)
		documented[m[1]] = strings.Join(labels, ",") + " " + m[3]
	}
	for n, r := range registered {
		if d, ok := documented[n]; !ok {
			t.Errorf("%s (%s) is not in docs/operations.md's Controller table", n, r)
		} else if d != r {
			t.Errorf("%s: documented as %q, registered as %q (labels type)", n, d, r)
		}
	}
	for n := range documented {
		if _, ok := registered[n]; !ok {
			t.Errorf("docs/operations.md documents %s, which the controller does not register", n)
		}
	}
}
