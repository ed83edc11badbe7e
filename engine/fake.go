package engine

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"golang.org/x/sys/unix"
)

// Fake is an in-memory Interface for callers' unit tests. It validates
// every rule and element by compiling it exactly as the Engine does, so a
// bad rule fails the same way, and Dump shows the table as nft text.
type Fake struct {
	table Table
	fam   byte

	mu    sync.Mutex
	d     *Desired // nil: no table
	syncs int
}

var (
	_ Interface = (*Engine)(nil)
	_ Interface = (*Fake)(nil)
)

// NewFake returns an empty fake table.
func NewFake(t Table) (*Fake, error) {
	fam, err := t.family()
	if err != nil {
		return nil, err
	}
	if t.Family == "" {
		t.Family = "inet"
	}
	return &Fake{table: t, fam: fam}, nil
}

// Sync validates d and stores a copy of it.
func (f *Fake) Sync(ctx context.Context, d *Desired) (Stats, error) {
	want, err := compile(f.fam, d)
	if err != nil {
		return Stats{}, fmt.Errorf("sync table %s: %w", f.table, err)
	}
	// The kernel rejects a jump or a verdict-map entry to a missing chain.
	for _, c := range want.chains {
		for _, r := range c.rules {
			for _, ref := range jumpTargets(r) {
				if _, ok := want.chains[ref]; !ok {
					return Stats{}, fmt.Errorf("sync table %s: %w", f.table,
						&Error{Op: "add rule to chain", Object: c.name, Index: r.index, Text: r.text, Message: -1, Errno: unix.ENOENT})
				}
			}
		}
	}
	for _, s := range want.sets {
		for id, el := range s.elems {
			if el.Verdict != nil && el.Verdict.Chain != "" {
				if _, ok := want.chains[el.Verdict.Chain]; !ok {
					return Stats{}, fmt.Errorf("sync table %s: %w", f.table,
						&Error{Op: "add elements to set", Object: s.name, Text: s.elemText[id], Message: -1, Errno: unix.ENOENT})
				}
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.d = copyDesired(d)
	f.syncs++
	return Stats{Attempts: 1}, nil
}

// Delete removes the fake table.
func (f *Fake) Delete(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.d = nil
	return nil
}

// Syncs counts successful Sync calls.
func (f *Fake) Syncs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncs
}

// Dump renders the table in nft syntax, as Render does, with sets sorted
// by name (chains in the order given), or "" when there is no table.
func (f *Fake) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.d == nil {
		return ""
	}
	d := &Desired{Chains: f.d.Chains, Sets: append([]Set(nil), f.d.Sets...)}
	sort.Slice(d.Sets, func(i, j int) bool { return d.Sets[i].Name < d.Sets[j].Name })
	// Sync compiled f.d, as Render would.
	return renderText(f.table, d)
}

func copyDesired(d *Desired) *Desired {
	c := &Desired{Chains: make([]Chain, len(d.Chains)), Sets: make([]Set, len(d.Sets))}
	for i, ch := range d.Chains {
		ch.Rules = append([]Rule(nil), ch.Rules...)
		c.Chains[i] = ch
	}
	for i, s := range d.Sets {
		s.Elements = append([]Element(nil), s.Elements...)
		c.Sets[i] = s
	}
	return c
}
