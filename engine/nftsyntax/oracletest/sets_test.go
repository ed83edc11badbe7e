package oracletest

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/engine/nftsyntax"
	"github.com/nftguard/nftguard/engine/nftwire"
	"github.com/nftguard/nftguard/internal/testns"
)

const tableName = "nftguard"

// nftText declares the cases' sets (and the chains verdict maps jump to)
// as an operator would, for nft -f.
func nftText(cases []setCase) string {
	var b strings.Builder
	b.WriteString("table inet " + tableName + " {\n")
	for _, ch := range targetChains {
		fmt.Fprintf(&b, "\tchain %s {\n\t}\n", ch)
	}
	for _, c := range cases {
		kind, typ := "set", c.key
		if c.data != "" {
			kind, typ = "map", c.key+" : "+c.data
		}
		fmt.Fprintf(&b, "\t%s %s {\n\t\ttype %s\n", kind, c.name, typ)
		if c.interval {
			b.WriteString("\t\tflags interval\n")
		}
		if c.timeout {
			b.WriteString("\t\tflags timeout\n")
		}
		if c.comment != "" {
			fmt.Fprintf(&b, "\t\tcomment %q\n", c.comment)
		}
		if len(c.elems) > 0 {
			items := make([]string, len(c.elems))
			for i, e := range c.elems {
				items[i] = e.Key
				if e.Value != "" {
					items[i] += " : " + e.Value
				}
			}
			fmt.Fprintf(&b, "\t\telements = { %s }\n", strings.Join(items, ", "))
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}

func desired(cases []setCase) *engine.Desired {
	d := &engine.Desired{}
	for _, ch := range targetChains {
		d.Chains = append(d.Chains, engine.Chain{Name: ch})
	}
	for _, c := range cases {
		d.Sets = append(d.Sets, engine.Set{Name: c.name, Type: c.key, Map: c.data, Interval: c.interval, Timeout: c.timeout, Elements: c.elems, Comment: c.comment})
	}
	return d
}

// listItems extracts the element items of an `nft list set` output
// ("10.0.0.0/8", "10.0.0.1 : jump a"), in printed order.
func listItems(list string) []string {
	i := strings.Index(list, "elements = {")
	if i < 0 {
		return nil
	}
	rest := list[i+len("elements = {"):]
	j := strings.Index(rest, "}")
	if j < 0 {
		return nil
	}
	var out []string
	for _, it := range strings.Split(rest[:j], ",") {
		if it = strings.Join(strings.Fields(it), " "); it != "" {
			out = append(out, it)
		}
	}
	return out
}

// normList replaces the element list of an `nft list set` output by its
// sorted items (hash sets dump in random order).
func normList(list string) string {
	i := strings.Index(list, "elements = {")
	if i < 0 {
		return list
	}
	j := strings.Index(list[i:], "}")
	items := listItems(list)
	sort.Strings(items)
	return list[:i] + "elements = { " + strings.Join(items, ", ") + " " + list[i+j:]
}

// normDebug sorts the element lines of `nft --debug=netlink list set`
// output and drops the text listing that follows them.
func normDebug(s string) string {
	var head, elems []string
	for _, l := range strings.Split(s, "\n") {
		switch {
		case strings.TrimSpace(l) == "":
		case strings.HasPrefix(l, "table "):
			sort.Strings(elems)
			return strings.Join(append(head, elems...), "\n")
		case strings.HasPrefix(l, "\telement"):
			elems = append(elems, l)
		default:
			head = append(head, l)
		}
	}
	sort.Strings(elems)
	return strings.Join(append(head, elems...), "\n")
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func itemTexts(es []nftsyntax.ElementText) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Key
		if e.Value != "" {
			out[i] += " : " + e.Value
		}
	}
	return out
}

func diffLines(a, b []string) string {
	var out []string
	in := func(x string, s []string) bool {
		for _, y := range s {
			if x == y {
				return true
			}
		}
		return false
	}
	for _, x := range a {
		if !in(x, b) {
			out = append(out, "- ours "+x)
		}
	}
	for _, y := range b {
		if !in(y, a) {
			out = append(out, "+ nft  "+y)
		}
	}
	return strings.Join(out, "\n")
}

// setComment is the set comment TLV (NFTNL_UDATA_SET_COMMENT) nft appends.
func setComment(c string) []byte {
	return append([]byte{7, byte(len(c) + 1)}, append([]byte(c), 0)...)
}

// TestOracleSets proves that named sets and maps are written as nft
// writes them: for every case, the engine (with nftsyntax.SetUserData,
// SetFlags and EncodeElements) writes the set into namespace A, nft -f
// declares it in namespace B, and the kernel's copies, nft's listings and
// DecodeElements of the dumped elements must agree.
func TestOracleSets(t *testing.T) {
	start := time.Now()
	runSetBatch(t, setCases, nil, false)
	t.Logf("%d set/map cases in %v", len(setCases), time.Since(start).Round(time.Millisecond))
}

// runSetBatch checks cases in one namespace pair. before, if not nil, is
// synced first (the same sets with other elements): the final sync then
// exercises the engine's element diff instead of a fresh table.
// With fresh, before is written by another Engine, so the final sync starts
// from a read of the kernel's copy (as at start-up) instead of a cache.
func runSetBatch(t *testing.T, cases []setCase, before []setCase, fresh bool) {
	ctx := context.Background()
	nsA, nsB := testns.New(t, "orca"), testns.New(t, "orcb")

	eng, err := engine.New(engine.Table{Name: tableName}, engine.WithNetNS(nsA.Path))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := eng.Delete(ctx); err != nil {
			t.Errorf("delete our table: %v", err)
		}
		eng.Close()
	})
	// One transaction for the whole batch; if the engine refuses it, add
	// the sets one sync at a time so that one bad case names itself and
	// does not hide the others.
	if before != nil {
		first := eng
		if fresh {
			if first, err = engine.New(engine.Table{Name: tableName}, engine.WithNetNS(nsA.Path)); err != nil {
				t.Fatal(err)
			}
			defer first.Close()
		}
		if _, err := first.Sync(ctx, desired(before)); err != nil {
			t.Fatalf("engine sync of the initial state: %v", err)
		}
	}
	syncErr := map[string]error{}
	if _, err := eng.Sync(ctx, desired(cases)); err != nil {
		t.Logf("engine sync of the whole batch failed (%v); syncing set by set", err)
		var ok []setCase
		for _, c := range cases {
			if _, err := eng.Sync(ctx, desired(append(ok, c))); err != nil {
				syncErr[c.name] = err
				continue
			}
			ok = append(ok, c)
		}
	}
	nftErr := map[string]error{}
	if _, err := nsB.Exec(nftText(cases), "nft", "-f", "-"); err != nil {
		t.Logf("nft -f of the whole batch failed (%v); loading set by set", err)
		for _, c := range cases {
			if _, err := nsB.Exec(nftText([]setCase{c}), "nft", "-f", "-"); err != nil {
				nftErr[c.name] = err
			}
		}
	}
	t.Cleanup(func() {
		if _, err := nsB.Exec("", "nft", "delete", "table", "inet", tableName); err != nil {
			t.Errorf("delete nft's table: %v", err)
		}
	})

	ra, err := dialRaw(nsA)
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	rb, err := dialRaw(nsB)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := nftErr[c.name]; err != nil {
				t.Fatalf("nft -f refused the set: %v", err)
			}
			if err := syncErr[c.name]; err != nil {
				// Still check nftsyntax against nft's copy.
				t.Errorf("engine refused the set: %v", err)
				checkSet(t, c, nil, nsB, nil, rb)
				return
			}
			checkSet(t, c, nsA, nsB, ra, rb)
		})
	}
}

func checkSet(t *testing.T, c setCase, nsA, nsB *testns.NS, ra, rb *rawConn) {
	decl, err := nftsyntax.ParseSetDecl(c.name, c.key, c.data, c.interval)
	if err != nil {
		t.Fatal(err)
	}
	decl.Timeout = c.timeout
	texts := make([]nftsyntax.ElementText, len(c.elems))
	for i, e := range c.elems {
		texts[i] = nftsyntax.ElementText{Key: e.Key, Value: e.Value}
	}

	// Test 4: the set itself (user data, flags, key and data types and
	// lengths, desc) as the kernel holds it.
	sb, err := rb.getSet(tableName, c.name)
	if err != nil {
		t.Fatal(err)
	}
	var sa rawSet
	if ra != nil {
		if sa, err = ra.getSet(tableName, c.name); err != nil {
			t.Fatal(err)
		}
		if sa.String() != sb.String() {
			t.Errorf("GETSET attributes differ:\n--- ours (engine)\n%s--- nft\n%s", sa, sb)
		}
	}
	wantUD := nftsyntax.SetUserData(decl)
	if c.comment != "" {
		wantUD = append(wantUD, setComment(c.comment)...)
	}
	if !bytes.Equal(wantUD, sb[attrSetUserData]) {
		t.Errorf("SetUserData = %x, nft wrote %x", wantUD, sb[attrSetUserData])
	}
	if f, _ := sb.u32(attrSetFlags); f != nftsyntax.SetFlags(decl) {
		t.Errorf("SetFlags = %#x, nft wrote %#x", nftsyntax.SetFlags(decl), f)
	}
	if kt, _ := sb.u32(attrSetKeyType); kt != decl.Key.Magic() {
		t.Errorf("key type = %#x, nft wrote %#x", decl.Key.Magic(), kt)
	}
	if kl, _ := sb.u32(attrSetKeyLen); kl != decl.Key.Len() {
		t.Errorf("key len = %d, nft wrote %d", decl.Key.Len(), kl)
	}
	if decl.Data != nil {
		if dt, _ := sb.u32(attrSetDataType); dt != decl.Data.WireDataType() {
			t.Errorf("data type = %#x, nft wrote %#x", decl.Data.WireDataType(), dt)
		}
	}

	// Test 3: EncodeElements against what nft wrote, element by element.
	eb, err := rb.getElems(tableName, c.name)
	if err != nil {
		t.Fatal(err)
	}
	var ea []rawElem
	if ra != nil {
		if ea, err = ra.getElems(tableName, c.name); err != nil {
			t.Fatal(err)
		}
		rawA, rawB := make([]string, len(ea)), make([]string, len(eb))
		for i, e := range ea {
			rawA[i] = e.raw
		}
		for i, e := range eb {
			rawB[i] = e.raw
		}
		rawA, rawB = sorted(rawA), sorted(rawB)
		if strings.Join(rawA, "\n") != strings.Join(rawB, "\n") {
			t.Errorf("GETSETELEM elements differ (attr=hex):\n%s", diffLines(rawA, rawB))
		}
	}
	enc, err := nftsyntax.EncodeElements(decl, texts)
	if err != nil {
		t.Fatalf("EncodeElements: %v", err)
	}
	var encS, nftS []string
	for _, e := range enc {
		encS = append(encS, elemString(e))
	}
	for _, e := range eb {
		nftS = append(nftS, elemString(e.elem))
	}
	encS, nftS = sorted(encS), sorted(nftS)
	if strings.Join(encS, "\n") != strings.Join(nftS, "\n") {
		t.Errorf("EncodeElements differs from the elements nft wrote:\n%s", diffLines(encS, nftS))
	}

	// What nft prints for both.
	kind := "set"
	if c.data != "" {
		kind = "map"
	}
	listB := nsB.MustExec(t, "", "nft", "list", kind, "inet", tableName, c.name)
	if nsA != nil {
		listA := nsA.MustExec(t, "", "nft", "list", kind, "inet", tableName, c.name)
		if normList(listA) != normList(listB) {
			t.Errorf("nft list %s differs:\n--- ours\n%s--- nft\n%s", kind, listA, listB)
		}
		dbgA := normDebug(nsA.MustExec(t, "", "nft", "--debug=netlink", "list", kind, "inet", tableName, c.name))
		dbgB := normDebug(nsB.MustExec(t, "", "nft", "--debug=netlink", "list", kind, "inet", tableName, c.name))
		if dbgA != dbgB {
			t.Errorf("nft --debug=netlink list %s differs:\n--- ours\n%s\n--- nft\n%s", kind, dbgA, dbgB)
		}
	}

	// DecodeElements of the kernel's elements (both copies) against nft's
	// canonical listing.
	want := listItems(listB)
	sides := []struct {
		name  string
		elems []rawElem
	}{{"nft's", eb}}
	if ra != nil {
		sides = append(sides, sides[0])
		sides[0].name, sides[0].elems = "our", ea
	}
	for _, side := range sides {
		es := make([]nftwire.Elem, len(side.elems))
		for i, e := range side.elems {
			es[i] = e.elem
		}
		dec, err := nftsyntax.DecodeElements(decl, es)
		if err != nil {
			t.Errorf("DecodeElements of %s kernel elements: %v", side.name, err)
			continue
		}
		got := itemTexts(dec)
		if strings.Join(sorted(got), "\n") != strings.Join(sorted(want), "\n") {
			t.Errorf("DecodeElements of %s kernel elements differs from nft list:\n%s", side.name, diffLines(sorted(got), sorted(want)))
		}
	}
}
