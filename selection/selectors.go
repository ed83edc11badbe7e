package selection

import (
	"sort"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
)

// nothingKey is the canonical text of a selector that selects nothing:
// labels.Nothing() prints as labels.Everything() does (""), and no selector
// text contains '<'.
const nothingKey = "<nothing>"

// AsSelector is metav1.LabelSelectorAsSelector, except that a value of an
// In or NotIn requirement that no label can have is read, not refused.
// Objects' labels are always validated, so no object carries such a value:
// In matches what its other values match (nothing, without one), NotIn
// excludes what its other values exclude (nothing, without one), which is
// what labels.Requirement.Matches answers. API servers before Kubernetes
// 1.27 stored NetworkPolicies with such values and still serve them (the
// only invalid part they accepted: keys, matchLabels and operators were
// always checked), and a ClusterNetworkPolicy's schema does not check
// values at all; refusing the selector would leave the policy out, and the
// pods its subject isolates would lose their isolation. Any other fault
// (a key, an operator, matchLabels) is still an error. Manifests are held
// to the API server's create-time rules elsewhere (package manifest).
func AsSelector(ls *metav1.LabelSelector) (labels.Selector, error) {
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err == nil || ls == nil {
		return sel, err
	}
	var reqs []labels.Requirement
	for k, v := range ls.MatchLabels {
		r, err := labels.NewRequirement(k, selection.Equals, []string{v})
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, *r)
	}
	nothing := false
	for _, e := range ls.MatchExpressions {
		var op selection.Operator
		vals := e.Values
		switch e.Operator {
		case metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn:
			op = selection.In
			if e.Operator == metav1.LabelSelectorOpNotIn {
				op = selection.NotIn
			}
			if len(vals) > 0 {
				vals = nil
				for _, v := range e.Values {
					if len(validation.IsValidLabelValue(v)) == 0 {
						vals = append(vals, v)
					}
				}
				if len(vals) == 0 {
					// Checked like the others, with no value to
					// match: In matches nothing, NotIn everything.
					if _, err := labels.NewRequirement(e.Key, selection.Exists, nil); err != nil {
						return nil, err
					}
					nothing = nothing || op == selection.In
					continue
				}
			}
		case metav1.LabelSelectorOpExists:
			op = selection.Exists
		case metav1.LabelSelectorOpDoesNotExist:
			op = selection.DoesNotExist
		default:
			return nil, err
		}
		r, err := labels.NewRequirement(e.Key, op, vals)
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, *r)
	}
	if nothing {
		return labels.Nothing(), nil
	}
	return labels.NewSelector().Add(reqs...), nil
}

// keyOf is the canonical text of a selector AsSelector returned.
func keyOf(sel labels.Selector) string {
	if _, selectable := sel.Requirements(); !selectable {
		return nothingKey
	}
	return sel.String()
}

// Parsed is a label selector parsed once per compile, with a canonical
// text: selectors with equal Key select the same objects.
type Parsed struct {
	Selector labels.Selector
	Key      string
	Err      error
}

// Selectors parses each distinct label selector once: policies repeat the
// same few selectors, and parsing validates every key and value with
// regular expressions. Lookups are by pointer first, then by content. A
// Selectors belongs to one compile: its answers stay valid as long as the
// objects it was handed do not change, which is what an informer promises.
type Selectors struct {
	byPtr     map[*metav1.LabelSelector]*Parsed
	byContent map[string]*Parsed
	buf       []byte
	keys      []string
}

// NewSelectors returns an empty cache.
func NewSelectors() *Selectors {
	return &Selectors{byPtr: map[*metav1.LabelSelector]*Parsed{}, byContent: map[string]*Parsed{}}
}

// Parse is AsSelector (ls must not be nil), cached. The result is shared
// and must not be changed.
func (sc *Selectors) Parse(ls *metav1.LabelSelector) *Parsed {
	if ps, ok := sc.byPtr[ls]; ok {
		return ps
	}
	ck := sc.contentKey(ls)
	ps, ok := sc.byContent[string(ck)]
	if !ok {
		sel, err := AsSelector(ls)
		ps = &Parsed{Selector: sel, Err: err}
		if err == nil {
			ps.Key = keyOf(sel)
		}
		sc.byContent[string(ck)] = ps
	}
	sc.byPtr[ls] = ps
	return ps
}

// contentKey encodes a selector unambiguously (every string is length
// prefixed; matchLabels sorted, matchExpressions in order). The bytes are
// valid until the next call.
func (sc *Selectors) contentKey(ls *metav1.LabelSelector) []byte {
	b := sc.buf[:0]
	str := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	keys := sc.keys[:0]
	for k := range ls.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = strconv.AppendInt(b, int64(len(keys)), 10)
	b = append(b, 'L')
	for _, k := range keys {
		str(k)
		str(ls.MatchLabels[k])
	}
	b = strconv.AppendInt(b, int64(len(ls.MatchExpressions)), 10)
	b = append(b, 'E')
	for _, e := range ls.MatchExpressions {
		str(e.Key)
		str(string(e.Operator))
		b = strconv.AppendInt(b, int64(len(e.Values)), 10)
		b = append(b, 'V')
		for _, v := range e.Values {
			str(v)
		}
	}
	sc.buf, sc.keys = b, keys
	return b
}
