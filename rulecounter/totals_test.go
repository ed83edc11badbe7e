package rulecounter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nftguard/nftguard/engine"
)

// sumView adds every count of its chains (prefix "c") by comment.
type sumView struct {
	totals map[string]engine.Count
	ends   []bool
}

func (v *sumView) Describe(chan<- *prometheus.Desc) {}
func (v *sumView) Collect(chan<- prometheus.Metric) {}
func (v *sumView) Chain(name string) bool           { return strings.HasPrefix(name, "c") }
func (v *sumView) End(read bool)                    { v.ends = append(v.ends, read) }
func (v *sumView) Count(rc *engine.RuleCounter, grown engine.Count, _ bool) {
	c := v.totals[rc.Comment]
	c.Packets += grown.Packets
	c.Bytes += grown.Bytes
	v.totals[rc.Comment] = c
}

// script is a Reader: each read returns the next of reads, after running
// the step's during (a sync that commits while the read is in flight).
type script struct {
	reads []step
}

type step struct {
	rcs    []engine.RuleCounter
	err    error
	during func()
}

func (s *script) Counters(_ context.Context, match func(string) bool) ([]engine.RuleCounter, error) {
	st := s.reads[0]
	s.reads = s.reads[1:]
	var out []engine.RuleCounter
	for _, rc := range st.rcs {
		if match(rc.Chain) {
			out = append(out, rc)
		}
	}
	if st.during != nil {
		st.during()
	}
	return out, st.err
}

func rc(chain string, handle uint64, comment string, packets ...uint64) engine.RuleCounter {
	r := engine.RuleCounter{Chain: chain, Handle: handle, Comment: comment}
	for _, p := range packets {
		r.Counters = append(r.Counters, engine.Count{Packets: p, Bytes: 10 * p})
	}
	return r
}

// The totals are every packet each rule counted, once, whatever the
// order of scrapes and deletions: a rule read then deleted adds its final
// count less what was read; a rule created and deleted between two
// scrapes adds all of it; a replaced rule (new handle) counts from zero;
// a rule deleted while a read is in flight is not added again by that
// read; a rule gone without a deletion report (someone else deleted it)
// loses only what it counted since the last read; a failed read keeps
// the totals and is reported; chains of no view are ignored.
func TestTotals(t *testing.T) {
	type event struct {
		name    string
		read    *step                // a scrape
		deleted []engine.RuleCounter // a sync's deletions
		want    map[string]uint64    // packets by comment after the event
	}
	var tot *Totals
	events := []event{
		{name: "first read", read: &step{rcs: []engine.RuleCounter{rc("c1", 1, "a", 5), rc("c1", 2, "b", 3, 4), rc("other", 1, "a", 100), rc("c1", 3, "jump")}},
			want: map[string]uint64{"a": 5, "b": 7}},
		// a/1 counts 2 more, then is deleted by a sync: 8 in all.
		{name: "deleted after a read", deleted: []engine.RuleCounter{rc("c1", 1, "a", 8)},
			want: map[string]uint64{"a": 8, "b": 7}},
		// Created and deleted between two scrapes: all of it.
		{name: "never read", deleted: []engine.RuleCounter{rc("c2", 7, "a", 6), rc("other", 9, "a", 50)},
			want: map[string]uint64{"a": 14, "b": 7}},
		// b replaced: b/2 deleted at 9, b/4 new; the read no longer has
		// a/1 or b/2.
		{name: "replaced", deleted: []engine.RuleCounter{rc("c1", 2, "b", 5, 4)},
			want: map[string]uint64{"a": 14, "b": 9}},
		{name: "read after", read: &step{rcs: []engine.RuleCounter{rc("c1", 4, "b", 1)}},
			want: map[string]uint64{"a": 14, "b": 10}},
		// A read in flight sees b/4 at 3; a sync deletes it at 5 before
		// the read is added: 5 in all for b/4, not 3 more.
		{name: "deleted during a read", read: &step{rcs: []engine.RuleCounter{rc("c1", 4, "b", 3), rc("c1", 5, "a", 2)},
			during: func() { tot.Deleted([]engine.RuleCounter{rc("c1", 4, "b", 5)}, nil) }},
			want: map[string]uint64{"a": 16, "b": 14}},
		{name: "next read", read: &step{rcs: []engine.RuleCounter{rc("c1", 5, "a", 2)}},
			want: map[string]uint64{"a": 16, "b": 14}},
		// A failed read changes nothing; its error is reported.
		{name: "failed read", read: &step{err: errors.New("netlink gone")},
			want: map[string]uint64{"a": 16, "b": 14}},
		// a/5 deleted by someone else (no report): what it counted
		// since the last read (1) is lost, nothing else.
		{name: "foreign deletion", read: &step{rcs: []engine.RuleCounter{rc("c1", 6, "b", 1)}},
			want: map[string]uint64{"a": 16, "b": 15}},
		// A report that could not be read at all is reported.
		{name: "unreadable deletion", deleted: []engine.RuleCounter{}, want: map[string]uint64{"a": 16, "b": 15}},
		// A deleted rule's handle reused in another chain is another rule.
		{name: "same handle, other chain", deleted: []engine.RuleCounter{rc("c2", 6, "b", 2)},
			want: map[string]uint64{"a": 16, "b": 17}},
	}
	tot = New()
	v := &sumView{totals: map[string]engine.Count{}}
	tot.Watch(v)
	src := &script{}
	var errs []error
	col := tot.Collector(src, time.Second, func(err error) { errs = append(errs, err) })
	for _, e := range events {
		if e.read != nil {
			src.reads = append(src.reads, *e.read)
			col.Collect(make(chan prometheus.Metric, 10))
		} else {
			var err error
			if e.name == "unreadable deletion" {
				err = errors.New("bad echo")
			}
			tot.Deleted(e.deleted, err)
		}
		got := map[string]uint64{}
		for k, c := range v.totals {
			got[k] = c.Packets
			if c.Bytes != 10*c.Packets {
				t.Errorf("%s: %s bytes %d, want %d", e.name, k, c.Bytes, 10*c.Packets)
			}
		}
		if len(got) != len(e.want) || got["a"] != e.want["a"] || got["b"] != e.want["b"] {
			t.Errorf("%s: totals %v, want %v", e.name, got, e.want)
		}
	}
	// The failed read's error, then the unreadable deletion's at the
	// next scrape.
	src.reads = append(src.reads, step{})
	col.Collect(make(chan prometheus.Metric, 10))
	if len(errs) != 2 || errs[0].Error() != "netlink gone" || errs[1].Error() != "bad echo" {
		t.Errorf("errors reported: %v", errs)
	}
}
