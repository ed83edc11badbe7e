package policy

import (
	"sort"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// parsedSelector is a label selector parsed once per compile, with a
// canonical text: selectors with equal text select the same objects.
type parsedSelector struct {
	sel labels.Selector
	key string
	err error
}

// selectorCache parses each distinct label selector once: policies repeat
// the same few selectors, and parsing validates every key and value with
// regular expressions. Lookups are by pointer first, then by content.
type selectorCache struct {
	byPtr     map[*metav1.LabelSelector]*parsedSelector
	byContent map[string]*parsedSelector
	portNames map[string][]string // port name → validation errors
	buf       []byte
	keys      []string
}

func newSelectorCache() *selectorCache {
	return &selectorCache{byPtr: map[*metav1.LabelSelector]*parsedSelector{}, byContent: map[string]*parsedSelector{}, portNames: map[string][]string{}}
}

// portNameErrors is validation.IsValidPortName, cached when sc is not nil.
func (sc *selectorCache) portNameErrors(name string) []string {
	if sc == nil {
		return validation.IsValidPortName(name)
	}
	errs, ok := sc.portNames[name]
	if !ok {
		errs = validation.IsValidPortName(name)
		sc.portNames[name] = errs
	}
	return errs
}

// parse is metav1.LabelSelectorAsSelector (ls must not be nil), cached when
// sc is not nil. The selector returned is shared and must not be changed.
func (sc *selectorCache) parse(ls *metav1.LabelSelector) (labels.Selector, error) {
	if sc == nil {
		return metav1.LabelSelectorAsSelector(ls)
	}
	ps := sc.get(ls)
	return ps.sel, ps.err
}

func (sc *selectorCache) get(ls *metav1.LabelSelector) *parsedSelector {
	if ps, ok := sc.byPtr[ls]; ok {
		return ps
	}
	ck := sc.contentKey(ls)
	ps, ok := sc.byContent[string(ck)]
	if !ok {
		sel, err := metav1.LabelSelectorAsSelector(ls)
		ps = &parsedSelector{sel: sel, err: err}
		if err == nil {
			ps.key = sel.String()
		}
		sc.byContent[string(ck)] = ps
	}
	sc.byPtr[ls] = ps
	return ps
}

// contentKey encodes a selector unambiguously (every string is length
// prefixed; matchLabels sorted, matchExpressions in order). The bytes are
// valid until the next call.
func (sc *selectorCache) contentKey(ls *metav1.LabelSelector) []byte {
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
