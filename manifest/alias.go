package manifest

import (
	"bytes"
	"fmt"

	yamlv3 "go.yaml.in/yaml/v3"
)

// A YAML alias stands for a copy of the node its anchor names, and the
// conversion to JSON writes every copy out: one 10 KB string aliased
// 100,000 times is 311 KB of YAML and a gigabyte of JSON, and nested
// anchors grow exponentially. The YAML library's own guard counts decoded
// nodes, not bytes, so it lets the first through and allows millions of
// nodes for the second. So a document with aliases is measured before it
// is converted: parsed into a node tree (which shares an anchored node
// rather than copying it), and its converted size computed from the tree
// with each anchored node sized once. A document whose aliases would make
// it more than maxExpansion times its own size is refused, whatever its
// kind (a kind nftguard ignores is converted too, to check its syntax).
//
// maxExpansion leaves room for what the conversion itself adds (quotes
// around plain scalars, "null" for "~") and for honest anchors (a label
// set or a port list repeated a few times), while keeping the JSON of
// any input, and what is decoded from it, a small multiple of the input.
const maxExpansion = 16

// expandedTooMuch says why a YAML document's aliases must not be expanded
// (the problem's reason), or "" when they may (or when it has none). Documents without a '*' have
// no alias and cost nothing here; one that the node parser refuses while
// it may hold aliases is refused with that parser's reason, since its
// expansion cannot be measured.
func expandedTooMuch(chunk []byte) string {
	if bytes.IndexByte(chunk, '*') < 0 {
		return ""
	}
	var root yamlv3.Node
	if err := yamlv3.Unmarshal(chunk, &root); err != nil {
		return "not valid YAML: " + oneLine(err.Error())
	}
	limit := int64(maxExpansion) * int64(len(chunk))
	m := sizer{limit: limit, sizes: map[*yamlv3.Node]int64{}, open: map[*yamlv3.Node]bool{}}
	size := m.size(&root)
	switch {
	case m.cycle:
		return "not valid YAML: an alias refers to the node that contains it"
	case size > limit:
		return fmt.Sprintf("refused: YAML aliases would expand this %d-byte document beyond %d bytes (%d times its size)", len(chunk), limit, maxExpansion)
	}
	return ""
}

// sizer computes the size of a node tree's JSON with aliases expanded,
// stopping as soon as it exceeds limit (the result is then limit+1).
type sizer struct {
	limit int64
	sizes map[*yamlv3.Node]int64 // anchored nodes already sized
	open  map[*yamlv3.Node]bool  // anchored nodes being sized
	cycle bool
}

func (m *sizer) size(n *yamlv3.Node) int64 {
	if n == nil || m.cycle {
		return 0
	}
	if n.Kind == yamlv3.AliasNode {
		return m.size(n.Alias)
	}
	if n.Anchor != "" {
		if s, ok := m.sizes[n]; ok {
			return s
		}
		if m.open[n] {
			m.cycle = true
			return 0
		}
		m.open[n] = true
		defer delete(m.open, n)
	}
	var s int64
	switch n.Kind {
	case yamlv3.ScalarNode:
		s = int64(len(n.Value)) + 2 // quoted, as a string would be
	default: // a document, mapping or sequence: brackets and separators
		s = 2
		for _, c := range n.Content {
			if s += m.size(c) + 1; s > m.limit {
				s = m.limit + 1
				break
			}
		}
	}
	if n.Anchor != "" {
		m.sizes[n] = s
	}
	return s
}
