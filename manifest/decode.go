package manifest

import (
	"errors"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"

	"github.com/nftguard/nftguard/internal/parallel"
	"github.com/nftguard/nftguard/problem"
)

// doc is one document to decode (a file's document or a List's item), or
// a problem found where one stood.
type doc struct {
	src    string
	data   []byte // the document's JSON: a slice of the input, not a copy
	id     problem.Object
	k      kind
	decode decodeFunc
	bad    *problem.Problem // instead of a document: the input is unreadable here

	// What decoding found: the object and its metadata, or the decode
	// errors (the input is unreadable), and the metadata problems (the
	// object is skipped).
	obj     any
	meta    *metav1.ObjectMeta
	errs    []problem.Problem
	invalid []problem.Problem
}

// bad records a problem that makes the input unreadable, in its place.
func (r *reader) bad(p problem.Problem) { r.docs = append(r.docs, doc{bad: &p}) }

// decodeBatch is how many documents a worker takes at a time: enough to
// make the hand-off cheap, few enough to share the work evenly.
const decodeBatch = 64

// decodeAll decodes the documents on every processor. At scale decoding is
// most of what apply does before it programs the kernel, and each document
// writes only its own doc.
func decodeAll(docs []doc) {
	parallel.For(parallel.Workers(len(docs), decodeBatch, 0), len(docs), decodeBatch, func(_, i int) { docs[i].run() })
}

// run decodes one document strictly, applies the API server's namespace
// defaulting and validates its metadata, then what else the API server
// refuses on create that the compilers read leniently. It is pure: it reads only d.
func (d *doc) run() {
	if d.decode == nil {
		return
	}
	obj, meta, errs := d.decode(d.data)
	if len(errs) > 0 {
		for _, err := range errs {
			p := problem.Problem{Source: d.src, Object: d.id, Reason: oneLine(err.Error())}
			var fe kjson.FieldError
			if errors.As(err, &fe) {
				// The message is `unknown field "PATH"` or `duplicate
				// field "PATH"`: keep its kind, the path goes in Field.
				p.Field = fe.FieldPath()
				p.Reason, _, _ = strings.Cut(p.Reason, " \"")
			}
			d.errs = append(d.errs, p)
		}
		return
	}
	// As the API server does: namespaced objects without a namespace are in
	// "default", and cluster-scoped objects have none.
	if d.k.namespaced && meta.Namespace == "" {
		meta.Namespace = metav1.NamespaceDefault
	}
	if !d.k.namespaced {
		meta.Namespace = ""
	}
	d.obj, d.meta = obj, meta
	d.invalid = validateMeta(d.src, d.id, meta, d.k)
	if len(d.invalid) == 0 {
		d.invalid = validateCreate(d.src, d.id, obj, meta)
	}
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
