package selection

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestAsSelectorReadsStoredValues: a matchExpressions value no label can
// have is read as what it selects (no object carries it), not refused, so
// that a policy an older API server stored keeps isolating its pods; a
// selector malformed otherwise stays an error.
func TestAsSelectorReadsStoredValues(t *testing.T) {
	expr := func(key string, op metav1.LabelSelectorOperator, vals ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: vals}}}
	}
	web := labels.Set{"app": "web"}
	db := labels.Set{"app": "db"}
	none := labels.Set{}
	const bad = "not a value!"
	badKey := "bad key/x/y"
	for _, tc := range []struct {
		name   string
		sel    *metav1.LabelSelector
		err    bool
		key    string
		match  []labels.Set
		reject []labels.Set
	}{
		{name: "valid selector unchanged", sel: expr("app", metav1.LabelSelectorOpIn, "web"), key: "app in (web)", match: []labels.Set{web}, reject: []labels.Set{db, none}},
		{name: "In keeps its valid values", sel: expr("app", metav1.LabelSelectorOpIn, bad, "web"), key: "app in (web)", match: []labels.Set{web}, reject: []labels.Set{db, none}},
		{name: "In of invalid values only selects nothing", sel: expr("app", metav1.LabelSelectorOpIn, bad), key: nothingKey, reject: []labels.Set{web, db, none}},
		{name: "NotIn keeps its valid values", sel: expr("app", metav1.LabelSelectorOpNotIn, bad, "db"), key: "app notin (db)", match: []labels.Set{web, none}, reject: []labels.Set{db}},
		{name: "NotIn of invalid values only selects everything", sel: expr("app", metav1.LabelSelectorOpNotIn, bad), key: "", match: []labels.Set{web, db, none}},
		// What the API server has always refused stays an error.
		{name: "an invalid key", sel: expr(badKey, metav1.LabelSelectorOpIn, bad), err: true},
		{name: "an invalid key of Exists", sel: expr(badKey, metav1.LabelSelectorOpExists), err: true},
		{name: "matchLabels with an invalid value", sel: &metav1.LabelSelector{MatchLabels: map[string]string{"app": bad},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{bad}}}}, err: true},
		{name: "other requirements still apply", sel: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{bad}}}},
			key: "app=web", match: []labels.Set{web}, reject: []labels.Set{db}},
		{name: "unknown operator", sel: expr("app", "Near", "web"), err: true},
		{name: "In without values", sel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{bad}}, {Key: "app", Operator: metav1.LabelSelectorOpIn}}}, err: true},
		{name: "Exists with values", sel: expr("app", metav1.LabelSelectorOpExists, bad), err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := AsSelector(tc.sel)
			if (err != nil) != tc.err {
				t.Fatalf("AsSelector: %v, want error %v", err, tc.err)
			}
			if err != nil {
				return
			}
			ps := NewSelectors().Parse(tc.sel)
			if ps.Err != nil || ps.Key != tc.key {
				t.Errorf("Parse: key %q, error %v; want key %q", ps.Key, ps.Err, tc.key)
			}
			for _, l := range tc.match {
				if !sel.Matches(l) {
					t.Errorf("does not select %v", l)
				}
			}
			for _, l := range tc.reject {
				if sel.Matches(l) {
					t.Errorf("selects %v", l)
				}
			}
		})
	}
}
