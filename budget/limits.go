package budget

import "fmt"

// Limits are the budgets: what one object may cost a node, and what all of
// them together may.
type Limits struct {
	Object Cost
	Node   Cost
}

// Default are the budgets the agent runs with; doc.go says how they were
// chosen.
func Default() Limits {
	return Limits{
		Object: Cost{Rules: 10_000, Elements: 150_000},
		Node:   Cost{Rules: 50_000, Elements: 200_000},
	}
}

// Validate refuses limits that would fail every object closed.
func (l Limits) Validate() error {
	if l.Object.Rules <= 0 || l.Object.Elements <= 0 || l.Node.Rules <= 0 || l.Node.Elements <= 0 {
		return fmt.Errorf("budget limits must be positive: %+v", l)
	}
	return nil
}
