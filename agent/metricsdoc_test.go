package agent

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/nftguard/nftguard/deniedflow"
	"github.com/nftguard/nftguard/dnsfwd"
	"github.com/nftguard/nftguard/dnsfwd/nodedns"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/fqdn"
	"github.com/nftguard/nftguard/rulecounter"
)

// recorder is the agent's registry, recording each collector registered.
type recorder struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// noCounters is a kernel that has no counters; the collectors that read it
// are described, never collected, here.
type noCounters struct{}

func (noCounters) Counters(context.Context, func(string) bool) ([]engine.RuleCounter, error) {
	return nil, nil
}

// noDomainSets is a kernel without domain rules' sets.
type noDomainSets struct{ engine.Timed }

// agentMetrics registers every collector `nftguard run` registers, with
// the constructors Run uses, on a recorder.
func agentMetrics(t *testing.T) *recorder {
	t.Helper()
	rec := &recorder{Registry: prometheus.NewRegistry()}
	m := newMetricsOn(rec)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	newCNPSource(nil, nil, DefaultCNPCheckInterval, m, log, func(string, bool) {})
	newEgressState(m.reg)
	newPodIfState(m.reg, "", log)
	if _, err := newEvents(nil, "n1", 0, m, log, nil); err != nil {
		t.Fatal(err)
	}
	counts := rulecounter.New()
	m.reg.MustRegister(nodedns.NewHeld(noDomainSets{}, &atomic.Pointer[fqdn.Table]{}, log))
	if _, err := dnsfwd.NewMetrics(m.reg); err != nil {
		t.Fatal(err)
	}
	if _, err := deniedflow.NewMetrics(m.reg, counts); err != nil {
		t.Fatal(err)
	}
	counts.Watch(newEgressCounters())
	counts.Watch(newGuardCounters())
	m.reg.MustRegister(counts.Collector(noCounters{}, time.Second, func(error) {}))
	return rec
}

// metricInfo is one metric: its type (counter, gauge, histogram; "" when
// only a scrape would tell) and its label names, sorted.
type metricInfo struct {
	typ    string
	labels []string
}

var descRE = regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)

// described reads the name and labels of every metric the collectors
// describe, and the type where the collector's own type says it.
func described(t *testing.T, cs []prometheus.Collector) map[string]metricInfo {
	t.Helper()
	out := map[string]metricInfo{}
	types := map[string]string{} // collected by collectors of their own
	for _, c := range cs {
		typ := ""
		switch c := c.(type) {
		case *prometheus.CounterVec:
			typ = "counter"
		case *prometheus.GaugeVec:
			typ = "gauge"
		case *prometheus.HistogramVec:
			typ = "histogram"
		case prometheus.Metric: // a plain counter, gauge or histogram
			typ = typeOf(t, c)
		case *egressCounters:
			for n, i := range described(t, []prometheus.Collector{c.packets, c.bytes, c.dropped}) {
				out[n] = i
			}
			continue
		default:
			// A collector of its own: its type is what it collects
			// (from a kernel without counters or domain sets).
			ch := make(chan prometheus.Metric, 16)
			go func() { c.Collect(ch); close(ch) }()
			for m := range ch {
				n := descRE.FindStringSubmatch(m.Desc().String())[1]
				types[n] = typeOf(t, m)
			}
		}
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := descRE.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read %s", d)
			}
			if strings.HasPrefix(m[1], "go_") || strings.HasPrefix(m[1], "process_") {
				continue // the standard Go and process collectors
			}
			var labels []string
			if m[2] != "" {
				labels = strings.Split(m[2], ",")
			}
			sort.Strings(labels)
			if typ == "" {
				typ = types[m[1]]
			}
			out[m[1]] = metricInfo{typ: typ, labels: labels}
		}
	}
	return out
}

func typeOf(t *testing.T, m prometheus.Metric) string {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	switch {
	case d.Counter != nil:
		return "counter"
	case d.Gauge != nil:
		return "gauge"
	case d.Histogram != nil:
		return "histogram"
	}
	return ""
}

// documented parses the metric table of docs/operations.md: rows
// | `name` | type | `label`, `label` (or —) | meaning |.
func documented(t *testing.T) map[string]metricInfo {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]metricInfo{}
	row := regexp.MustCompile("^\\| `(nftguard_[a-z0-9_]+)` \\| ([a-z]+) \\| ([^|]*) \\|")
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := row.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if _, dup := out[m[1]]; dup {
			t.Errorf("docs/operations.md lists %s twice", m[1])
		}
		var labels []string
		for _, l := range strings.Split(m[3], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" && l != "—" {
				labels = append(labels, l)
			}
		}
		sort.Strings(labels)
		out[m[1]] = metricInfo{typ: m[2], labels: labels}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("docs/operations.md has no metric table")
	}
	return out
}

// declaredInSource finds the metric names declared anywhere in the
// module's non-test code (the Name of a prometheus ...Opts, and NewDesc),
// so that a collector registered where agentMetrics does not look fails
// the test too.
func declaredInSource(t *testing.T) []string {
	t.Helper()
	decl := regexp.MustCompile(`(?:Opts\{\s*Name:\s*|NewDesc\(\s*)"(nftguard_[a-z0-9_]+)"`)
	seen := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != ".." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "bench" || n == "e2e") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllSubmatch(b, -1) {
			seen[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// TestMetricsDocumented: docs/operations.md lists every metric the agent
// registers, with its type and labels, and no metric it does not register.
func TestMetricsDocumented(t *testing.T) {
	got := described(t, agentMetrics(t).collectors)
	if os.Getenv("NFTGUARD_DUMP_METRICS") != "" {
		var names []string
		for n := range got {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Printf("| `%s` | %s | %s |\n", n, got[n].typ, strings.Join(got[n].labels, ", "))
		}
	}
	for _, n := range declaredInSource(t) {
		if _, ok := got[n]; !ok {
			t.Errorf("%s is declared in the code but not registered by agentMetrics: register it there as Run does", n)
		}
	}
	doc := documented(t)
	for n, g := range got {
		d, ok := doc[n]
		switch {
		case !ok:
			t.Errorf("%s (%s, labels %q) is not in docs/operations.md's metric table", n, g.typ, g.labels)
		case !slices.Equal(d.labels, g.labels):
			t.Errorf("%s: docs/operations.md says labels %q, the code %q", n, d.labels, g.labels)
		case g.typ != "" && d.typ != g.typ:
			t.Errorf("%s: docs/operations.md says %s, the code %s", n, d.typ, g.typ)
		}
	}
	for n := range doc {
		if _, ok := got[n]; !ok {
			t.Errorf("docs/operations.md lists %s, which the agent does not register", n)
		}
	}
}
