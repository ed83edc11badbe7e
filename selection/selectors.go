package selection

import (
	"sort"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

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

// Parse is metav1.LabelSelectorAsSelector (ls must not be nil), cached. The
// result is shared and must not be changed.
func (sc *Selectors) Parse(ls *metav1.LabelSelector) *Parsed {
	if ps, ok := sc.byPtr[ls]; ok {
		return ps
	}
	ck := sc.contentKey(ls)
	ps, ok := sc.byContent[string(ck)]
	if !ok {
		sel, err := metav1.LabelSelectorAsSelector(ls)
		ps = &Parsed{Selector: sel, Err: err}
		if err == nil {
			ps.Key = sel.String()
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
