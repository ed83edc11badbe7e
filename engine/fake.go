package engine

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftsyntax"
	"github.com/nftguard/nftguard/engine/nftwire"
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
	// timed holds the timeout sets' elements by set and key text (as
	// nft prints it), with the kernel's two times.
	timed map[string]map[string]fakeTimed
}

type fakeTimed struct {
	timeout time.Duration
	expires time.Time
	comment string
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
	// A timeout set that goes, or is declared anew, loses its elements,
	// as the kernel's does.
	for name := range f.timed {
		if old, now := f.timedSet(f.d, name), f.timedSet(d, name); old == nil || now == nil || old.Type != now.Type || old.Comment != now.Comment {
			delete(f.timed, name)
		}
	}
	f.d = copyDesired(d)
	f.syncs++
	return Stats{Attempts: 1}, nil
}

// timedSet returns the timeout set name of d, or nil.
func (f *Fake) timedSet(d *Desired, name string) *Set {
	if d == nil {
		return nil
	}
	for _, s := range d.Sets {
		if s.Name == name && s.Timeout {
			return &s
		}
	}
	return nil
}

// timedDecl is Engine.timedDecl of the fake's last Sync.
func (f *Fake) timedDecl(name string) (nftsyntax.SetDecl, error) {
	s := f.timedSet(f.d, name)
	if s == nil {
		return nftsyntax.SetDecl{}, fmt.Errorf("set %q is not a timeout set of table %s: %w", name, f.table,
			&Error{Op: "add elements to set", Object: name, Message: -1, Errno: unix.ENOENT})
	}
	d, err := nftsyntax.ParseSetDecl(s.Name, s.Type, "", false)
	d.Timeout = true
	return d, err
}

// AddTimed validates the elements as Engine.AddTimed does and keeps them
// with their expiry (from time.Now()); an element already present gets
// the new timeout.
func (f *Fake) AddTimed(ctx context.Context, elems []TimedElement) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	type add struct {
		set, key string
		t        fakeTimed
	}
	adds := make([]add, 0, len(elems))
	now := time.Now()
	for _, el := range elems {
		d, err := f.timedDecl(el.Set)
		if err != nil {
			return fmt.Errorf("add timed elements: %w", err)
		}
		if el.Timeout <= 0 {
			return fmt.Errorf("add timed elements: set %s element %q: timeout %v is not positive", el.Set, el.Key, el.Timeout)
		}
		key, err := nftsyntax.AppendElementKey(nil, d, el.Key)
		if err != nil {
			return fmt.Errorf("add timed elements: %w", err)
		}
		texts, err := nftsyntax.DecodeElements(d, []nftwire.Elem{{Key: key}})
		if err != nil || len(texts) != 1 {
			return fmt.Errorf("add timed elements: set %s element %q: cannot print key back (%v)", el.Set, el.Key, err)
		}
		to := (el.Timeout + time.Millisecond - 1).Truncate(time.Millisecond)
		adds = append(adds, add{el.Set, texts[0].Key, fakeTimed{timeout: to, expires: now.Add(to), comment: elemComment(el.Comment)}})
	}
	if f.timed == nil {
		f.timed = map[string]map[string]fakeTimed{}
	}
	for _, a := range adds {
		m := f.timed[a.set]
		if m == nil {
			m = map[string]fakeTimed{}
			f.timed[a.set] = m
		}
		if old, ok := m[a.key]; ok && old.expires.After(now) {
			a.t.comment = old.comment // the kernel keeps an element's comment
		}
		m[a.key] = a.t
	}
	return nil
}

// ReadTimed returns the elements of a timeout set that have not expired,
// sorted by key.
func (f *Fake) ReadTimed(ctx context.Context, set string) ([]TimedState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := f.timedDecl(set); err != nil {
		return nil, fmt.Errorf("read timed elements: %w", err)
	}
	now := time.Now()
	var out []TimedState
	for k, t := range f.timed[set] {
		if left := t.expires.Sub(now); left > 0 {
			out = append(out, TimedState{Key: k, Timeout: t.timeout, Expires: left.Truncate(time.Millisecond), Comment: t.comment})
		} else {
			delete(f.timed[set], k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Delete removes the fake table.
func (f *Fake) Delete(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.d = nil
	f.timed = nil
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
