package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/nftguard/nftguard/internal/testns"
)

// hostileDesired is a table whose strings look like nft commands but are
// valid: each one stays inside the quotes or the name it belongs to.
func hostileDesired() *Desired {
	return &Desired{
		Sets: []Set{
			{Name: "s.1/x-y_z", Type: "ipv4_addr", Elements: []Element{{Key: "10.0.0.1"}},
				Comment: "} } table ip evil { chain c { type filter hook input priority 0; policy drop; } }"},
		},
		Chains: []Chain{
			{Name: "in", Type: "filter", Hook: "input", Comment: "; flush ruleset; # \\ \\n $x @y 'z' ü",
				Rules: []Rule{
					{Rule: `iifname "x;}{#" accept`, Comment: "}\\n table inet other { }"},
					{Rule: "ip saddr @s.1/x-y_z drop", Comment: "a { b } c ; d"},
				}},
		},
	}
}

// TestRefusesStringsNftCannotReadBack: a name or comment that nft would
// print as something else (or as more than our table) fails the sync and
// the render, with an error naming the object.
func TestRefusesStringsNftCannotReadBack(t *testing.T) {
	base := func() *Desired {
		return &Desired{
			Sets:   []Set{{Name: "s", Type: "ipv4_addr"}},
			Chains: []Chain{{Name: "c", Type: "filter", Hook: "input", Rules: []Rule{{Rule: "accept"}}}},
		}
	}
	for _, c := range []struct {
		name   string
		change func(d *Desired)
		want   string // in the error
	}{
		{"rule comment with a quote", func(d *Desired) { d.Chains[0].Rules[0].Comment = `a" } table ip x { "` }, `chain "c" rule 1`},
		{"rule comment with a newline", func(d *Desired) { d.Chains[0].Rules[0].Comment = "a\n}\ntable ip x {" }, `chain "c" rule 1`},
		{"rule comment with a NUL", func(d *Desired) { d.Chains[0].Rules[0].Comment = "a\x00b" }, `chain "c" rule 1`},
		{"rule comment too long", func(d *Desired) { d.Chains[0].Rules[0].Comment = strings.Repeat("a", 129) }, `chain "c" rule 1`},
		{"chain comment with a quote", func(d *Desired) { d.Chains[0].Comment = `x"; flush ruleset; "` }, `chain "c"`},
		{"chain comment with a control character", func(d *Desired) { d.Chains[0].Comment = "x\x1b[2J" }, `chain "c"`},
		{"chain comment too long", func(d *Desired) { d.Chains[0].Comment = strings.Repeat("a", 129) }, `chain "c"`},
		{"set comment with a newline", func(d *Desired) { d.Sets[0].Comment = "x\r\ny" }, `set "s"`},
		{"set comment with DEL", func(d *Desired) { d.Sets[0].Comment = "x\x7f" }, `set "s"`},
		{"chain name with blanks", func(d *Desired) { d.Chains[0].Name = "c { } table ip x { chain y" }, `chain "c { } table ip x { chain y"`},
		{"chain name with a semicolon", func(d *Desired) { d.Chains[0].Name = "c;flush" }, `chain "c;flush"`},
		{"chain name a keyword", func(d *Desired) { d.Chains[0].Name = "table" }, `chain "table"`},
		{"chain name too long", func(d *Desired) { d.Chains[0].Name = strings.Repeat("c", 256) }, `chain "ccc`},
		{"empty chain name", func(d *Desired) { d.Chains[0].Name = "" }, `chain ""`},
		{"chain type not nft's", func(d *Desired) { d.Chains[0].Type = "filter; } table ip x {" }, `chain "c": unknown type`},
		{"ingress hook without a device", func(d *Desired) { d.Chains[0].Hook = "ingress" }, `chain "c": an ingress hook needs a device`},
		{"device on another hook", func(d *Desired) { d.Chains[0].Device = "lo" }, `chain "c": a device is only`},
		{"device name with a quote", func(d *Desired) { d.Chains[0].Hook, d.Chains[0].Device = "ingress", `v"; flush` }, `chain "c": device name`},
		{"device name too long", func(d *Desired) { d.Chains[0].Hook, d.Chains[0].Device = "ingress", "veth0123456789ab" }, `chain "c": device name`},
		{"device name with a blank", func(d *Desired) { d.Chains[0].Hook, d.Chains[0].Device = "ingress", "a b" }, `chain "c": device name`},
		{"set name with a brace", func(d *Desired) { d.Sets[0].Name = "s}" }, `set "s}"`},
		{"set type with a brace", func(d *Desired) { d.Sets[0].Type = "ipv4_addr; } table ip x { set y { type ipv4_addr" }, `set "s"`},
		{"rule with a second command", func(d *Desired) { d.Chains[0].Rules[0].Rule = "accept; }\ntable ip x {" }, `chain "c" rule 1`},
		{"element with a brace", func(d *Desired) { d.Sets[0].Elements = []Element{{Key: "10.0.0.1 } table ip x {"}} }, `set "s"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := base()
			c.change(d)
			f, err := NewFake(Table{Name: "nftguard"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Sync(context.Background(), d); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Sync: %v, want an error naming %s", err, c.want)
			}
			if out, err := Render(Table{Name: "nftguard"}, d); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Render: %v, want an error naming %s; rendered:\n%s", err, c.want, out)
			}
		})
	}
	for _, name := range []string{"nft guard", "x{", "", "table"} {
		if _, err := Render(Table{Name: name}, base()); err == nil {
			t.Errorf("Render of table %q succeeded", name)
		}
		if _, err := NewFake(Table{Name: name}); err == nil {
			t.Errorf("NewFake of table %q succeeded", name)
		}
	}
}

// TestRenderHostileLooksOneTable: the hostile-looking valid table renders
// as one table, every string written as given.
func TestRenderHostileLooksOneTable(t *testing.T) {
	out, err := Render(Table{Name: "nftguard"}, hostileDesired())
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "\ntable ") + strings.Count(out[:6], "table "); n != 1 {
		t.Errorf("%d table statements at the start of a line:\n%s", n, out)
	}
	for _, s := range []string{"comment \"; flush ruleset; # \\ \\n $x @y 'z' ü\"", "comment \"}\\n table inet other { }\""} {
		if !strings.Contains(out, s) {
			t.Errorf("rendered text lacks %s:\n%s", s, out)
		}
	}
}

// TestRenderHostileKernel: nft reads the rendered hostile-looking table
// (nft -c -f), loads it as exactly one table with the strings unchanged,
// and the engine syncing the same Desired finds nothing to change.
func TestRenderHostileKernel(t *testing.T) {
	ns := testns.New(t, "enghostile")
	d := hostileDesired()
	out, err := Render(Table{Name: "nftguard"}, d)
	if err != nil {
		t.Fatal(err)
	}
	ns.MustExec(t, out, "nft", "-c", "-f", "-")
	ns.MustExec(t, out, "nft", "-f", "-")
	tables := strings.Fields(ns.MustExec(t, "", "nft", "list", "tables"))
	if strings.Join(tables, " ") != "table inet nftguard" {
		t.Fatalf("nft -f of the rendered text made tables %q:\n%s", tables, out)
	}
	listed := ns.MustExec(t, "", "nft", "list", "ruleset")
	for _, s := range []string{d.Sets[0].Comment, d.Chains[0].Comment, d.Chains[0].Rules[0].Comment, d.Chains[0].Rules[1].Comment} {
		if !strings.Contains(listed, `"`+s+`"`) {
			t.Errorf("nft list lacks comment %q:\n%s", s, listed)
		}
	}
	e := newTestEngine(t, ns)
	st, err := e.Sync(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	if st.Messages != 0 {
		t.Errorf("the engine found %d messages to send over nft's load of the rendered text", st.Messages)
	}
}
