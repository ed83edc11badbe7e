package engine

import (
	"fmt"
	"strings"
)

// Render prints d as an nft script of the table t, in the order nft list
// uses (sets and maps, then chains), so `nft -f` can load it and a person can
// read it. It touches nothing.
//
// d is first compiled as Sync compiles it, so what Render prints is what
// Sync would send: every name an nft identifier, every rule and element
// one that nftsyntax parsed, every comment a string nft reads back
// unchanged. Nothing in d can therefore end the table early or add a
// command; the script declares the one table t and nothing else.
func Render(t Table, d *Desired) (string, error) {
	fam, err := t.family()
	if err != nil {
		return "", err
	}
	if _, err := compile(fam, d); err != nil {
		return "", fmt.Errorf("render table %s: %w", t, err)
	}
	return renderText(t, d), nil
}

// renderText is Render of a d that compiled.
func renderText(t Table, d *Desired) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table %s {\n", t)
	for _, s := range d.Sets {
		kind, typ := "set", s.Type
		if s.Map != "" {
			kind, typ = "map", s.Type+" : "+s.Map
		}
		fmt.Fprintf(&b, "\t%s %s {\n\t\ttype %s\n", kind, s.Name, typ)
		switch {
		case s.Interval:
			b.WriteString("\t\tflags interval\n")
		case s.Timeout:
			b.WriteString("\t\tflags timeout\n")
		}
		if s.Comment != "" {
			fmt.Fprintf(&b, "\t\tcomment %s\n", quote(s.Comment))
		}
		if len(s.Elements) > 0 {
			b.WriteString("\t\telements = {")
			for i, e := range s.Elements {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString("\n\t\t\t")
				b.WriteString(e.Key)
				if e.Value != "" {
					b.WriteString(" : ")
					b.WriteString(e.Value)
				}
			}
			b.WriteString(" }\n")
		}
		b.WriteString("\t}\n")
	}
	for _, c := range d.Chains {
		fmt.Fprintf(&b, "\tchain %s {\n", c.Name)
		if c.Comment != "" {
			fmt.Fprintf(&b, "\t\tcomment %s\n", quote(c.Comment))
		}
		if c.Hook != "" {
			typ, policy := c.Type, c.Policy
			if typ == "" {
				typ = "filter"
			}
			if policy == "" {
				policy = "accept"
			}
			dev := ""
			if c.Device != "" {
				dev = " device " + quote(c.Device)
			}
			fmt.Fprintf(&b, "\t\ttype %s hook %s%s priority %d; policy %s;\n", typ, c.Hook, dev, c.Priority, policy)
		}
		for _, r := range c.Rules {
			b.WriteString("\t\t")
			b.WriteString(r.Rule)
			if r.Comment != "" {
				fmt.Fprintf(&b, " comment %s", quote(r.Comment))
			}
			b.WriteByte('\n')
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// quote writes a string as nft reads it: in double quotes, without escapes
// (nft has none; validation refused any string that would need one).
func quote(s string) string { return `"` + s + `"` }
