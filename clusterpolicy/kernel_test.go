package clusterpolicy

import (
	"context"
	"math/rand"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/testns"
)

// TestTablesRoundTripThroughNft holds the ClusterNetworkPolicy tables to
// principle 3 (docs/design.md): each golden scenario's table and random
// clusters' tables load into the kernel through the engine, nft lists them as the engine
// renders them, nft -f of that listing in a fresh namespace is a table a
// fresh engine finds nothing to change in, and a fresh engine over the
// engine's own table finds nothing either.
func TestTablesRoundTripThroughNft(t *testing.T) {
	ctx := context.Background()
	tbl := engine.Table{Name: "nftguard"}
	ns := testns.New(t, "cnprt")
	ns2 := testns.New(t, "cnprt2")
	eng, err := engine.New(tbl, engine.WithNetNS(ns.Path))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()

	cases := map[string]Input{}
	for name, in := range goldenScenarios() {
		cases[name] = in
	}
	for seed := int64(0); len(cases) < 40; seed++ {
		in := randomCluster(rand.New(rand.NewSource(seed)))
		if out := Compile(in); len(out.Chains) > 2 {
			cases["random-"+string(rune('a'+seed%26))+strings.Repeat("x", int(seed/26))] = in
		}
	}
	names := make([]string, 0, len(cases))
	for n := range cases {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		in := cases[name]
		d := table(in, Compile(in))
		rendered, err := engine.Render(tbl, d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := eng.Sync(ctx, d); err != nil {
			t.Fatalf("%s: sync: %v", name, err)
		}
		listed := ns.MustExec(t, "", "nft", "list", "table", "inet", "nftguard")
		// nft lists a counter with its values; the engine renders the
		// statement (with logging on, Deny rules count).
		norm := counterValues.ReplaceAllString(strings.ReplaceAll(listed, "priority filter;", "priority 0;"), "counter")
		if diff := cmp.Diff(blocks(rendered), blocks(norm)); diff != "" {
			t.Errorf("%s: nft lists the table otherwise than the engine renders it (-engine +nft):\n%s", name, diff)
		}
		ns2.MustExec(t, "", "sh", "-c", "nft delete table inet nftguard 2>/dev/null; true")
		ns2.MustExec(t, listed, "nft", "-f", "-")
		eng2, err := engine.New(tbl, engine.WithNetNS(ns2.Path))
		if err != nil {
			t.Fatal(err)
		}
		st, err := eng2.Sync(ctx, d)
		eng2.Close()
		if err != nil || st.Messages != 0 {
			t.Errorf("%s: nft -f of nft's listing is not the engine's table: a fresh engine sends %d messages (%v)", name, st.Messages, err)
		}
		eng3, err := engine.New(tbl, engine.WithNetNS(ns.Path))
		if err != nil {
			t.Fatal(err)
		}
		st, err = eng3.Sync(ctx, d)
		eng3.Close()
		if err != nil || st.Messages != 0 {
			t.Errorf("%s: a fresh engine over the engine's own table sends %d messages (%v)", name, st.Messages, err)
		}
	}
	t.Logf("%d tables round-tripped", len(names))
}

var counterValues = regexp.MustCompile(`counter packets \d+ bytes \d+`)

// blocks splits an nft listing into its chain and set blocks, each as its
// lines without indentation, sorted by block: nft lists sets and chains in
// an order of its own.
func blocks(text string) []string {
	var out []string
	var cur []string
	depth := 0
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if depth == 1 && strings.HasSuffix(l, "{") {
			cur = nil
		}
		cur = append(cur, l)
		depth += strings.Count(l, "{") - strings.Count(l, "}")
		if depth == 1 && strings.HasSuffix(l, "}") && cur != nil {
			out = append(out, normBlock(strings.Join(cur, " ")))
			cur = nil
		}
	}
	sort.Strings(out)
	return out
}

// normBlock writes a block's whitespace as single spaces and its elements
// sorted: nft wraps and orders elements its own way.
func normBlock(b string) string {
	b = strings.Join(strings.Fields(b), " ")
	const open = "elements = { "
	i := strings.Index(b, open)
	if i < 0 {
		return b
	}
	j := strings.Index(b[i:], " }")
	elems := strings.Split(b[i+len(open):i+j], ", ")
	for k := range elems {
		elems[k] = strings.TrimSuffix(elems[k], ",")
	}
	sort.Strings(elems)
	return b[:i+len(open)] + strings.Join(elems, ", ") + b[i+j:]
}
