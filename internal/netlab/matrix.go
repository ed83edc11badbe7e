package netlab

import (
	"fmt"
	"slices"
	"strings"
)

// Matrix is a connectivity matrix: for each port, whether each source (row)
// reaches each destination (column). It prints as one table per port, in the
// style of the Kubernetes netpol e2e reachability tables.
type Matrix struct {
	Family Family
	From   []string
	To     []string
	Ports  []Port

	cells map[cell]bool
}

type cell struct {
	port     Port
	from, to string
}

// NewMatrix returns a matrix whose every cell is set to allowed.
func NewMatrix(f Family, from, to []string, ports []Port, allowed bool) *Matrix {
	m := &Matrix{Family: f, From: slices.Clone(from), To: slices.Clone(to), Ports: slices.Clone(ports), cells: map[cell]bool{}}
	return m.ExpectAll(allowed)
}

// Allowed reports the cell from -> to on port.
func (m *Matrix) Allowed(from, to string, port Port) bool {
	return m.cells[cell{port, from, to}]
}

func (m *Matrix) set(p Port, from, to string, allowed bool) {
	m.cells[cell{p, from, to}] = allowed
}

// update sets every cell matching the filters ("" matches any row or
// column; no ports match all ports). Unknown names panic: a typo in an
// expectation must not pass silently.
func (m *Matrix) update(from, to string, allowed bool, ports []Port) *Matrix {
	if from != "" && !slices.Contains(m.From, from) {
		panic(fmt.Sprintf("netlab: matrix has no row %q", from))
	}
	if to != "" && !slices.Contains(m.To, to) {
		panic(fmt.Sprintf("netlab: matrix has no column %q", to))
	}
	for _, p := range ports {
		if !slices.Contains(m.Ports, p) {
			panic(fmt.Sprintf("netlab: matrix has no port %v", p))
		}
	}
	if len(ports) == 0 {
		ports = m.Ports
	}
	for _, p := range ports {
		for _, f := range m.From {
			for _, t := range m.To {
				if (from == "" || f == from) && (to == "" || t == to) {
					m.set(p, f, t, allowed)
				}
			}
		}
	}
	return m
}

// ExpectAll sets every cell (of the given ports, or all ports).
func (m *Matrix) ExpectAll(allowed bool, ports ...Port) *Matrix {
	return m.update("", "", allowed, ports)
}

// Expect sets the cell from -> to (on the given ports, or all ports).
func (m *Matrix) Expect(from, to string, allowed bool, ports ...Port) *Matrix {
	return m.update(from, to, allowed, ports)
}

// ExpectFrom sets the row of from (on the given ports, or all ports).
func (m *Matrix) ExpectFrom(from string, allowed bool, ports ...Port) *Matrix {
	return m.update(from, "", allowed, ports)
}

// ExpectTo sets the column of to (on the given ports, or all ports).
func (m *Matrix) ExpectTo(to string, allowed bool, ports ...Port) *Matrix {
	return m.update("", to, allowed, ports)
}

// String prints one table per port: rows are sources, columns destinations,
// "." allowed and "X" denied.
func (m *Matrix) String() string {
	var b strings.Builder
	for i, p := range m.Ports {
		if i > 0 {
			b.WriteByte('\n')
		}
		m.writeTable(&b, p)
	}
	return b.String()
}

func (m *Matrix) writeTable(b *strings.Builder, p Port) {
	title := fmt.Sprintf("%v %v", p, m.Family)
	w := len(title)
	for _, f := range m.From {
		w = max(w, len(f))
	}
	fmt.Fprintf(b, "%-*s", w, title)
	for _, t := range m.To {
		fmt.Fprintf(b, " %s", t)
	}
	b.WriteByte('\n')
	for _, f := range m.From {
		fmt.Fprintf(b, "%-*s", w, f)
		for _, t := range m.To {
			mark := "X"
			if m.Allowed(f, t, p) {
				mark = "."
			}
			fmt.Fprintf(b, " %-*s", len(t), mark)
		}
		b.WriteByte('\n')
	}
}

// Compare returns "" when the matrices agree, and otherwise the wrong cells
// followed by both tables of every port that has one.
func Compare(expected, actual *Matrix) string {
	if expected.Family != actual.Family || !slices.Equal(expected.From, actual.From) ||
		!slices.Equal(expected.To, actual.To) || !slices.Equal(expected.Ports, actual.Ports) {
		return fmt.Sprintf("matrices have different shapes:\nexpected %v %v -> %v %v\nactual   %v %v -> %v %v",
			expected.Family, expected.From, expected.To, expected.Ports,
			actual.Family, actual.From, actual.To, actual.Ports)
	}
	var wrong []string
	var ports []Port
	for _, p := range expected.Ports {
		bad := false
		for _, f := range expected.From {
			for _, t := range expected.To {
				e, a := expected.Allowed(f, t, p), actual.Allowed(f, t, p)
				if e != a {
					bad = true
					wrong = append(wrong, fmt.Sprintf("  %v %v %s -> %s: expected %s, got %s", p, expected.Family, f, t, verdict(e), verdict(a)))
				}
			}
		}
		if bad {
			ports = append(ports, p)
		}
	}
	if len(wrong) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d cells differ:\n%s\n", len(wrong), len(expected.Ports)*len(expected.From)*len(expected.To), strings.Join(wrong, "\n"))
	for _, p := range ports {
		b.WriteString("\nexpected:\n")
		expected.writeTable(&b, p)
		b.WriteString("actual:\n")
		actual.writeTable(&b, p)
	}
	return b.String()
}

func verdict(allowed bool) string {
	if allowed {
		return "allowed"
	}
	return "denied"
}
