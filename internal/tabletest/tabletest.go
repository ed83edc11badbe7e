// Package tabletest reads the chains and sets a compiler produced, for
// the compilers' tests: find one by name (failing the test with the names
// there are when it is missing) and list its rules or elements as text;
// and it checks that they load (Loads).
package tabletest

import (
	"context"
	"strings"
	"testing"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/nftcheck"
)

// Loads loads d into the engine's Fake, which compiles every rule and
// element with the same nft syntax compiler the kernel path uses, and
// checks it with nftcheck.Check: a rule a compiler emits that nft would not
// accept, or that the kernel would refuse, fails the test without a
// kernel.
func Loads(t testing.TB, d *engine.Desired) {
	t.Helper()
	fake, err := engine.NewFake(engine.Table{Name: "nftguard"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fake.Sync(context.Background(), d); err != nil {
		t.Fatalf("compiled table does not load: %v", err)
	}
	for _, err := range nftcheck.Check(d) {
		t.Errorf("the kernel would refuse the compiled table: %v", err)
	}
}

// Chain is the chain called name; the test fails if there is none.
func Chain(t testing.TB, chains []engine.Chain, name string) engine.Chain {
	t.Helper()
	for _, c := range chains {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no chain %q; chains: %v", name, ChainNames(chains))
	return engine.Chain{}
}

// ChainNames are the chains' names, in order.
func ChainNames(chains []engine.Chain) []string {
	var n []string
	for _, c := range chains {
		n = append(n, c.Name)
	}
	return n
}

// Rules are the chain's rules as nft text, in order.
func Rules(c engine.Chain) []string {
	var r []string
	for _, x := range c.Rules {
		r = append(r, x.Rule)
	}
	return r
}

// Set is the set or map called name; the test fails if there is none.
func Set(t testing.TB, sets []engine.Set, name string) engine.Set {
	t.Helper()
	for _, s := range sets {
		if s.Name == name {
			return s
		}
	}
	var names []string
	for _, s := range sets {
		names = append(names, s.Name)
	}
	t.Fatalf("no set %q; sets: %v", name, names)
	return engine.Set{}
}

// Elements are the set's elements as text: "key", or "key : value" in a
// map.
func Elements(s engine.Set) []string {
	var k []string
	for _, e := range s.Elements {
		if e.Value != "" {
			k = append(k, e.Key+" : "+e.Value)
		} else {
			k = append(k, e.Key)
		}
	}
	return k
}

// EqualLines fails the test (not at once) unless got and want are the
// same lines, in order; what names them in the message.
func EqualLines(t testing.TB, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n got: %q\nwant: %q", what, got, want)
	}
}
