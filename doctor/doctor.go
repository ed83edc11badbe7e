package doctor

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/nftguard/nftguard/engine"
)

// Options configure Run.
type Options struct {
	// NetNS is the network namespace to inspect (path); "" is the
	// current one.
	NetNS string
	// Table is nftguard's own table.
	Table engine.Table
	// Hooks are the base chains of nftguard's table.
	Hooks []Hook
	// Desired, when set, is what `render` would program; doctor says
	// whether the table in the namespace matches it.
	Desired *engine.Desired
	// Probe runs the kernel feature probe (in a private namespace).
	Probe bool
	// MetricsURL, when set, is a live agent's metrics endpoint to read the
	// age of its last sync from.
	MetricsURL string
	HTTPClient *http.Client
	Now        func() time.Time
}

// Report is the outcome of Run.
type Report struct {
	NetNS    string    `json:"netns,omitempty"`
	Findings []Finding `json:"findings"`
}

// Worst returns the highest severity found (Info when there is nothing).
func (r *Report) Worst() Severity {
	w := Info
	for _, f := range r.Findings {
		w = max(w, f.Severity)
	}
	return w
}

// Count returns how many findings have severity s.
func (r *Report) Count(s Severity) int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == s {
			n++
		}
	}
	return n
}

// Run inspects the namespace. The error means it could not be inspected at
// all; problems found are findings.
func Run(ctx context.Context, o Options) (*Report, error) {
	own := o.Table.String()
	ropts := ReadOptions{}
	if o.Desired != nil {
		ropts.ElementsOf = []string{own}
	}
	rs, err := Read(o.NetNS, ropts)
	if err != nil {
		return nil, err
	}
	rep := &Report{NetNS: o.NetNS}
	if o.Probe {
		rep.Findings = append(rep.Findings, Probe(ctx)...)
	}
	rep.Findings = append(rep.Findings, Check(rs, Config{Table: own, Hooks: o.Hooks})...)
	if o.Desired != nil {
		rep.Findings = append(rep.Findings, checkSync(ctx, rs, o.Table, o.Desired)...)
	}
	if o.MetricsURL != "" {
		client := o.HTTPClient
		if client == nil {
			client = &http.Client{Timeout: 5 * time.Second}
		}
		now := time.Now
		if o.Now != nil {
			now = o.Now
		}
		rep.Findings = append(rep.Findings, checkMetrics(ctx, client, o.MetricsURL, now()))
	}
	sort.SliceStable(rep.Findings, func(i, j int) bool { return rep.Findings[i].Severity > rep.Findings[j].Severity })
	return rep, nil
}

// checkSync programs the desired table into a private scratch namespace
// with nftguard's own engine, reads it back with the same reader, and
// compares it with the table found: both sides are kernel objects, so the
// comparison is exact (bytecode, set elements) without a second renderer.
func checkSync(ctx context.Context, rs *Ruleset, t engine.Table, d *engine.Desired) []Finding {
	var want *Ruleset
	err := inPrivateNetNS(func(nsPath string) error {
		eng, err := engine.New(t, engine.WithNetNS(nsPath))
		if err != nil {
			return err
		}
		defer eng.Close()
		if _, err := eng.Sync(ctx, d); err != nil {
			return fmt.Errorf("program the desired table: %w", err)
		}
		want, err = Read(nsPath, ReadOptions{ElementsOf: []string{t.String()}})
		return err
	})
	if err != nil {
		return []Finding{{Severity: Warning, Check: "nftguard", Table: t.String(), Message: "could not build the desired table to compare with: " + err.Error()}}
	}
	diffs := diffTables(findTable(want, t.String()), findTable(rs, t.String()))
	if len(diffs) == 0 {
		return []Finding{{Severity: Info, Check: "nftguard", Table: t.String(), Message: "in sync with the manifests"}}
	}
	var texts, opening []string
	for _, d := range diffs {
		texts = append(texts, d.text)
		if d.opens {
			opening = append(opening, d.text)
		}
	}
	const show = 20
	f := Finding{Severity: Warning, Check: "nftguard", Table: t.String(),
		Message: fmt.Sprintf("out of sync with the manifests (%d differences)", len(diffs)), Details: texts}
	if len(opening) > 0 {
		// More open than the manifests is never a mere warning: it is
		// what the table exists to prevent.
		f.Severity = Error
		f.Message = fmt.Sprintf("more open than the manifests (%d of %d differences may let through what they stop): %s",
			len(opening), len(diffs), strings.Join(opening[:min(len(opening), 3)], "; "))
		if len(opening) > 3 {
			f.Message += fmt.Sprintf("; and %d more", len(opening)-3)
		}
	}
	if len(texts) > show {
		f.Details = append(texts[:show:show], fmt.Sprintf("... and %d more", len(texts)-show))
	}
	f.Advice = "run `nftguard apply` with these manifests, or check that the agent is running"
	return []Finding{f}
}

func findTable(rs *Ruleset, key string) *Table {
	if rs == nil {
		return nil
	}
	for _, t := range rs.Tables {
		if t.String() == key {
			return t
		}
	}
	return nil
}
