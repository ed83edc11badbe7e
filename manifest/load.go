package manifest

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nftguard/nftguard/problem"
)

// Load reads every manifest under paths: a file, a directory (its *.yaml,
// *.yml and *.json files, recursively), or "-" for standard input.
//
// If anything cannot be read or decoded, Load returns an *InputError naming
// every such document, and no objects. Otherwise it returns the objects and
// the Problems of the objects it left out because the API server would
// refuse their metadata. Kinds nftguard does not read are ignored, as are
// kinds of other API groups that share a name with one it reads (a Knative
// Service).
func Load(stdin io.Reader, paths ...string) (*Objects, []problem.Problem, error) {
	r := &reader{index: map[string]int{}}
	for _, p := range paths {
		files, err := expand(p)
		if err != nil {
			r.bad(problem.Problem{Source: p, Reason: err.Error()})
			continue
		}
		for _, f := range files {
			var data []byte
			if f == "-" {
				data, err = io.ReadAll(stdin)
			} else {
				data, err = os.ReadFile(f)
			}
			if err != nil {
				r.bad(problem.Problem{Source: f, Reason: fmt.Sprintf("cannot read: %v", err)})
				continue
			}
			r.file(f, data)
		}
	}
	r.finish()
	if len(r.unreadable) > 0 {
		return nil, nil, &InputError{Problems: r.unreadable}
	}
	return r.objects(), r.skipped, nil
}

func expand(p string) ([]string, error) {
	if p == "-" {
		return []string{p}, nil
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{p}, nil
	}
	var files []string
	err = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				files = append(files, path)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	return files, nil
}

// reader accumulates what Load reads. Objects are kept in one list in input
// order so a repeated object can replace the earlier one in place.
//
// Reading has two steps. The first scans every file once (syntax, and
// where each document and List item is and what kind it is) and lines up
// the documents to decode, with the problems found so far in their places.
// The second decodes each document once, straight from the input bytes
// into its typed object, on every processor (documents are independent),
// and then records the results in input order.
type reader struct {
	entries    []entry
	index      map[string]int // sourceKey -> entries index
	warnings   []problem.Problem
	skipped    []problem.Problem
	unreadable []problem.Problem
	docs       []doc
}

type entry struct {
	kind, source string
	obj          any // nil: the object was skipped, but it still replaces an earlier one
}

// finish decodes the documents lined up and records what they hold.
func (r *reader) finish() {
	decodeAll(r.docs)
	r.entries = slices.Grow(r.entries, len(r.docs))
	for i := range r.docs {
		d := &r.docs[i]
		switch {
		case d.bad != nil:
			r.unreadable = append(r.unreadable, *d.bad)
		case len(d.errs) > 0:
			r.unreadable = append(r.unreadable, d.errs...)
		default:
			r.add(d.src, d.id.Kind, d.obj, d.meta, d.invalid)
		}
	}
	r.docs = nil
}

// add records an object (or, with problems, its skipping). An object given
// again replaces the earlier one, in its place, with a warning naming both
// places.
func (r *reader) add(src, kind string, obj any, meta *metav1.ObjectMeta, problems []problem.Problem) {
	e := entry{kind: kind, source: src, obj: obj}
	if len(problems) > 0 {
		r.skipped = append(r.skipped, problems...)
		e.obj = failClosed(obj, problems)
	}
	key := sourceKey(kind, meta.Namespace, meta.Name)
	if i, ok := r.index[key]; ok {
		id := problem.Object{APIVersion: kinds[kind].apiVersion, Kind: kind, Namespace: shown(meta.Namespace), Name: shown(meta.Name)}
		r.warnings = append(r.warnings, problem.Problem{Source: src, Object: id,
			Reason: fmt.Sprintf("given again: replaces the one read at %s", r.entries[i].source)})
		r.entries[i] = e
		return
	}
	r.index[key] = len(r.entries)
	r.entries = append(r.entries, e)
}
