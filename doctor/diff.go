package doctor

import (
	"bytes"
	"fmt"
)

// diffTables lists how got differs from want: chains (hook, priority,
// policy, rule bytecode and comments, in order) and sets (types, flags,
// elements). Handles are ignored: they differ between any two kernels.
func diffTables(want, got *Table) []string {
	switch {
	case want == nil && got == nil:
		return nil
	case got == nil:
		return []string{"the table is missing"}
	case want == nil:
		return []string{"the table exists but the manifests produce none"}
	}
	var out []string
	gotChains := map[string]*Chain{}
	for _, c := range got.Chains {
		gotChains[c.Name] = c
	}
	for _, w := range want.Chains {
		g, ok := gotChains[w.Name]
		if !ok {
			out = append(out, "chain "+w.Name+" is missing")
			continue
		}
		delete(gotChains, w.Name)
		if w.Hook != g.Hook || w.Type != g.Type || w.Priority != g.Priority || w.Policy != g.Policy {
			out = append(out, fmt.Sprintf("chain %s: hook %s %s priority %d policy %s, want hook %s %s priority %d policy %s",
				w.Name, g.Type, g.Hook, g.Priority, g.Policy, w.Type, w.Hook, w.Priority, w.Policy))
		}
		for i := range max(len(w.Rules), len(g.Rules)) {
			switch {
			case i >= len(g.Rules):
				out = append(out, fmt.Sprintf("chain %s: rule %d is missing: %s", w.Name, i+1, w.Rules[i].Text))
			case i >= len(w.Rules):
				out = append(out, fmt.Sprintf("chain %s: extra rule (handle %d): %s", w.Name, g.Rules[i].Handle, g.Rules[i].Text))
			case !bytes.Equal(w.Rules[i].Raw, g.Rules[i].Raw) || !bytes.Equal(w.Rules[i].UserData, g.Rules[i].UserData):
				out = append(out, fmt.Sprintf("chain %s: rule %d (handle %d) is %q, want %q", w.Name, i+1, g.Rules[i].Handle, g.Rules[i].Text, w.Rules[i].Text))
			}
		}
	}
	for _, c := range got.Chains {
		if _, extra := gotChains[c.Name]; extra {
			out = append(out, "extra chain "+c.Name)
		}
	}
	gotSets := map[string]*Set{}
	for _, s := range got.Sets {
		gotSets[s.Name] = s
	}
	for _, w := range want.Sets {
		g, ok := gotSets[w.Name]
		if !ok {
			out = append(out, "set "+w.Name+" is missing")
			continue
		}
		delete(gotSets, w.Name)
		if w.Flags != g.Flags || w.KeyType != g.KeyType || w.KeyLen != g.KeyLen || w.DataType != g.DataType || w.DataLen != g.DataLen {
			out = append(out, "set "+w.Name+": different type or flags")
		}
		if missing, extra := diffElements(w.Elements, g.Elements); missing+extra > 0 {
			out = append(out, fmt.Sprintf("set %s: %d elements missing, %d extra", w.Name, missing, extra))
		}
	}
	for _, s := range got.Sets {
		if _, extra := gotSets[s.Name]; extra {
			out = append(out, "extra set "+s.Name)
		}
	}
	return out
}

// diffElements counts elements only in want (missing) and only in got
// (extra); both lists are sorted.
func diffElements(want, got [][]byte) (missing, extra int) {
	i, j := 0, 0
	for i < len(want) || j < len(got) {
		switch {
		case j == len(got):
			missing++
			i++
		case i == len(want):
			extra++
			j++
		default:
			switch c := bytes.Compare(want[i], got[j]); {
			case c == 0:
				i++
				j++
			case c < 0:
				missing++
				i++
			default:
				extra++
				j++
			}
		}
	}
	return missing, extra
}
