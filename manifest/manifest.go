// Package manifest reads Kubernetes manifests (YAML or JSON, several
// documents per file, files or directories) into the typed API objects that
// nftguard's compilers read, for the one-shot commands that run without an
// API server.
//
// Reading is strict, like `kubectl apply --validate=strict`, and it is all or
// nothing: input that cannot be decoded completely (a syntax error anywhere,
// an unknown or duplicate field, a known kind with an apiVersion nftguard
// does not read, a document that is not an object) makes Load return an
// *InputError and no objects, so a caller changes nothing rather than
// enforce a guess. A well-formed object whose metadata the API server would
// refuse (an invalid name, namespace, label or annotation key) is a Problem:
// it is left out and the rest is returned, as the compilers do with objects
// they cannot compile.
//
// Every kind is read in one apiVersion, except ClusterNetworkPolicy
// (policy.networking.k8s.io), which the API server serves as v1beta1 and
// v1alpha2 with one schema: both are read, and v1alpha2 is converted to
// v1beta1 (see cnp.go).
package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	cnpv1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/nftguard/nftguard/internal/parallel"
	"github.com/nftguard/nftguard/problem"
)

// Objects are the API objects found in the manifests, in file order.
type Objects struct {
	Namespaces      []*corev1.Namespace
	Nodes           []*corev1.Node
	Pods            []*corev1.Pod
	NetworkPolicies []*networkingv1.NetworkPolicy
	// ClusterNetworkPolicies of policy.networking.k8s.io v1beta1 and
	// v1alpha2 (identical schemas), all as v1beta1.
	ClusterNetworkPolicies []*cnpv1beta1.ClusterNetworkPolicy
	Services               []*corev1.Service
	EndpointSlices         []*discoveryv1.EndpointSlice
	// Warnings are about input that was read but may not mean what its
	// author thinks: an object given twice (the later one is used).
	Warnings []problem.Problem

	// sources maps kind/namespace/name to "FILE:DOCUMENT".
	sources map[string]string
}

// Len is the number of objects.
func (o *Objects) Len() int {
	return len(o.Namespaces) + len(o.Nodes) + len(o.Pods) + len(o.NetworkPolicies) + len(o.ClusterNetworkPolicies) + len(o.Services) + len(o.EndpointSlices)
}

// Source says where the object was read ("FILE:DOCUMENT"), or "" when it was
// not read from a manifest. The apiVersion is ignored: an object is the same
// object in every version it is read in (ClusterNetworkPolicy v1alpha2 and
// v1beta1).
func (o *Objects) Source(obj problem.Object) string {
	return o.sources[sourceKey(obj.Kind, obj.Namespace, obj.Name)]
}

func sourceKey(kind, ns, name string) string { return kind + "\x00" + ns + "\x00" + name }

// InputError says the manifests could not be read completely; Problems
// names every document that could not be decoded and why. Nothing read is
// returned with it: applying what could be read would enforce a guess.
type InputError struct {
	Problems []problem.Problem
}

func (e *InputError) Error() string {
	if len(e.Problems) == 1 {
		return "unreadable input: " + e.Problems[0].Error()
	}
	return fmt.Sprintf("unreadable input: %d problems, the first: %v", len(e.Problems), e.Problems[0])
}

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

// kind is what the reader knows about one kind it reads.
type kind struct {
	apiVersion string
	namespaced bool
	// name validates metadata.name as the API server does for this kind.
	name apivalidation.ValidateNameFunc
	// decode decodes a document strictly and returns the object's metadata.
	decode decodeFunc
	// also are further apiVersions the kind is read in, each with its
	// decoder, which returns the object converted to apiVersion.
	also map[string]decodeFunc
}

type decodeFunc func(data []byte) (any, *metav1.ObjectMeta, []error)

// decoder returns the decoder of apiVersion, or nil when the kind is not
// read in that version.
func (k kind) decoder(apiVersion string) decodeFunc {
	if apiVersion == k.apiVersion {
		return k.decode
	}
	return k.also[apiVersion]
}

// versions lists the apiVersions the kind is read in, for messages.
func (k kind) versions() string {
	vs := []string{k.apiVersion}
	for v := range k.also {
		vs = append(vs, v)
	}
	sort.Strings(vs[1:])
	return strings.Join(vs, " or ")
}

func decodeAs[T any](meta func(*T) *metav1.ObjectMeta) decodeFunc {
	return func(data []byte) (any, *metav1.ObjectMeta, []error) {
		o := new(T)
		// UnmarshalStrict is what the API machinery's strict serializer
		// uses: case-sensitive, unknown and duplicate fields are errors
		// that carry the field path.
		strictErrs, err := kjson.UnmarshalStrict(data, o)
		if err != nil {
			return nil, nil, []error{err}
		}
		if len(strictErrs) > 0 {
			return nil, nil, strictErrs
		}
		return o, meta(o), nil
	}
}

// kinds are the kinds nftguard reads, with the name rules of the API
// server's validation for each (Services are DNS-1035 labels, Namespaces
// DNS-1123 labels, the others DNS-1123 subdomains).
var kinds = map[string]kind{
	"Namespace": {problem.CoreV1, false, apivalidation.ValidateNamespaceName,
		decodeAs(func(o *corev1.Namespace) *metav1.ObjectMeta { return &o.ObjectMeta }), nil},
	"Node": {problem.CoreV1, false, apivalidation.NameIsDNSSubdomain,
		decodeAs(func(o *corev1.Node) *metav1.ObjectMeta { return &o.ObjectMeta }), nil},
	"Pod": {problem.CoreV1, true, apivalidation.NameIsDNSSubdomain,
		decodeAs(func(o *corev1.Pod) *metav1.ObjectMeta { return &o.ObjectMeta }), nil},
	"Service": {problem.CoreV1, true, apivalidation.NameIsDNS1035Label,
		decodeAs(func(o *corev1.Service) *metav1.ObjectMeta { return &o.ObjectMeta }), nil},
	"NetworkPolicy": {problem.NetworkingV1, true, apivalidation.NameIsDNSSubdomain,
		decodeAs(func(o *networkingv1.NetworkPolicy) *metav1.ObjectMeta { return &o.ObjectMeta }), nil},
	"EndpointSlice": {problem.DiscoveryV1, true, apivalidation.NameIsDNSSubdomain,
		decodeAs(func(o *discoveryv1.EndpointSlice) *metav1.ObjectMeta { return &o.ObjectMeta }), nil},
	// A custom resource: the API server validates its name as a DNS-1123
	// subdomain, and it is cluster-scoped.
	"ClusterNetworkPolicy": {CNPV1beta1, false, apivalidation.NameIsDNSSubdomain,
		decodeAs(func(o *cnpv1beta1.ClusterNetworkPolicy) *metav1.ObjectMeta { return &o.ObjectMeta }),
		map[string]decodeFunc{CNPV1alpha2: decodeCNPv1alpha2}},
}

// The served versions of ClusterNetworkPolicy (sigs.k8s.io/network-policy-api
// v0.3.0): v1beta1 is the storage version, v1alpha2 has the same schema.
var (
	CNPV1beta1  = cnpv1beta1.GroupVersion.String()
	CNPV1alpha2 = cnpv1alpha2.GroupVersion.String()
)

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
// defaulting and validates its metadata. It is pure: it reads only d.
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
}

func (r *reader) objects() *Objects {
	objs := &Objects{Warnings: r.warnings, sources: map[string]string{}}
	for _, e := range r.entries {
		switch o := e.obj.(type) {
		case *corev1.Namespace:
			objs.Namespaces = append(objs.Namespaces, o)
		case *corev1.Node:
			objs.Nodes = append(objs.Nodes, o)
		case *corev1.Pod:
			objs.Pods = append(objs.Pods, o)
		case *corev1.Service:
			objs.Services = append(objs.Services, o)
		case *networkingv1.NetworkPolicy:
			objs.NetworkPolicies = append(objs.NetworkPolicies, o)
		case *cnpv1beta1.ClusterNetworkPolicy:
			objs.ClusterNetworkPolicies = append(objs.ClusterNetworkPolicies, o)
		case *discoveryv1.EndpointSlice:
			objs.EndpointSlices = append(objs.EndpointSlices, o)
		}
	}
	for k, i := range r.index {
		if r.entries[i].obj != nil {
			objs.sources[k] = r.entries[i].source
		}
	}
	return objs
}

// file reads one file's documents: a JSON stream when it starts with "{",
// YAML documents separated by "---" lines otherwise.
func (r *reader) file(name string, data []byte) {
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		values, err := scanStream(data)
		for i, v := range values {
			r.document(docSource(name, i+1), data, v)
		}
		if err != nil {
			// A JSON stream cannot be resynchronised after a syntax error.
			r.bad(problem.Problem{Source: docSource(name, len(values)+1), Reason: fmt.Sprintf("not valid JSON: %v", err)})
		}
		return
	}
	// YAML: the documents are split on "---" lines first, then converted
	// to JSON on every processor (the conversion is most of the cost of
	// reading YAML, and each document's is independent), then read in
	// order.
	var chunks [][]byte
	var readErr error
	yr := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		chunk, err := yr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			readErr = err
			break
		}
		chunks = append(chunks, chunk)
	}
	converted := make([]yamlDoc, len(chunks))
	parallel.For(parallel.Workers(len(chunks), 1, 0), len(chunks), 1, func(_, i int) { converted[i] = convertYAML(chunks[i]) })
	for i, c := range converted {
		src := docSource(name, i+1)
		switch {
		case c.bad != nil:
			c.bad.Source = src
			r.bad(*c.bad)
		case c.ok:
			r.document(src, c.json, c.v)
		}
	}
	if readErr != nil {
		r.bad(problem.Problem{Source: docSource(name, len(chunks)+1), Reason: fmt.Sprintf("not valid YAML: %v", readErr)})
	}
}

// yamlDoc is one YAML document converted to JSON and scanned, or why it
// could not be.
type yamlDoc struct {
	json []byte
	v    value
	ok   bool // false: an empty document (or only comments)
	bad  *problem.Problem
}

// convertYAML converts one YAML document to JSON and scans it. It is pure,
// so documents are converted in parallel.
func convertYAML(chunk []byte) yamlDoc {
	// Strict: a key given twice in a mapping is an error, as the YAML
	// specification says (the lenient conversion keeps one silently).
	j, err := yaml.YAMLToJSONStrict(chunk)
	if err != nil {
		p := problem.Problem{Reason: fmt.Sprintf("not valid YAML: %s", oneLine(err.Error()))}
		if path, ok := duplicateKey(chunk); ok {
			p.Field, p.Reason = path, "duplicate field"
		}
		// Documents are split on "---" lines before they are parsed, so
		// the next one can still be checked and reported.
		return yamlDoc{bad: &p}
	}
	v, ok, err := scanOne(j)
	if err != nil {
		// The converter writes JSON; this would be its bug.
		return yamlDoc{bad: &problem.Problem{Reason: fmt.Sprintf("not valid YAML: converted to invalid JSON: %v", err)}}
	}
	return yamlDoc{json: j, v: v, ok: ok}
}

func docSource(file string, doc int) string { return file + ":" + strconv.Itoa(doc) }

// document lines up one scanned document (v, in data) for decoding, or
// the items of a List.
func (r *reader) document(src string, data []byte, v value) {
	if !v.object {
		if string(data[v.start:v.end]) == "null" {
			return // an empty document, or only comments
		}
		r.bad(problem.Problem{Source: src, Reason: "not a Kubernetes object: a document must be a mapping with apiVersion and kind"})
		return
	}
	var tm metav1.TypeMeta
	var err error
	if tm.APIVersion, err = text(data, v.apiVersion); err != nil {
		r.bad(problem.Problem{Source: src, Reason: fmt.Sprintf("not a Kubernetes object: apiVersion: %v", err)})
		return
	}
	if tm.Kind, err = text(data, v.kind); err != nil {
		r.bad(problem.Problem{Source: src, Reason: fmt.Sprintf("not a Kubernetes object: kind: %v", err)})
		return
	}
	if tm.APIVersion == "" || tm.Kind == "" {
		r.bad(problem.Problem{Source: src, Reason: "not a Kubernetes object: apiVersion and kind are required"})
		return
	}
	if r.list(src, tm, data, v) {
		return
	}
	k, ok := kinds[tm.Kind]
	if !ok {
		return // a kind nftguard does not read
	}
	id := problem.Object{APIVersion: tm.APIVersion, Kind: tm.Kind}
	decode := k.decoder(tm.APIVersion)
	if decode == nil {
		if !kubernetesGroup(tm.APIVersion) {
			return // another API group's kind of the same name
		}
		r.bad(problem.Problem{Source: src, Object: id, Field: "apiVersion", Value: tm.APIVersion,
			Reason: fmt.Sprintf("nftguard reads %s only as %s", tm.Kind, k.versions())})
		return
	}
	r.docs = append(r.docs, doc{src: src, data: data[v.start:v.end], id: id, k: k, decode: decode})
}

// kubernetesGroup says whether apiVersion names a group of the Kubernetes
// API itself (core, a group without a dot such as "extensions", or one
// under k8s.io), where a kind nftguard reads in a version it does not read
// is a mistake rather than somebody else's resource.
func kubernetesGroup(apiVersion string) bool {
	group, _, found := strings.Cut(apiVersion, "/")
	if !found {
		return true
	}
	return !strings.Contains(group, ".") || group == "k8s.io" || strings.HasSuffix(group, ".k8s.io")
}

// list reads a List (kind "List" in v1, or KINDList in the version nftguard
// reads KIND in), and says whether the document was one.
func (r *reader) list(src string, tm metav1.TypeMeta, data []byte, v value) bool {
	itemKind, isList := strings.CutSuffix(tm.Kind, "List")
	if !isList {
		return false
	}
	if itemKind == "" {
		if tm.APIVersion != "v1" {
			return false
		}
	} else if k, ok := kinds[itemKind]; !ok {
		return false
	} else if k.decoder(tm.APIVersion) == nil {
		if !kubernetesGroup(tm.APIVersion) {
			return false // another API group's list of the same name
		}
		// The items would be refused one by one; so is their list.
		r.bad(problem.Problem{Source: src, Object: problem.Object{APIVersion: tm.APIVersion, Kind: tm.Kind}, Field: "apiVersion", Value: tm.APIVersion,
			Reason: fmt.Sprintf("nftguard reads %s only as %s", itemKind, k.versions())})
		return true
	}
	// The List itself is decoded strictly too (an unknown or duplicate
	// field, a wrong type), but with its items array emptied: the items
	// are decoded one by one into their own types, from the spans the
	// scanner noted, not copied out first.
	skeleton := data[v.start:v.end]
	if v.itemsArray {
		skeleton = make([]byte, 0, (v.items.start-v.start)+2+(v.end-v.items.end))
		skeleton = append(skeleton, data[v.start:v.items.start]...)
		skeleton = append(skeleton, "[]"...)
		skeleton = append(skeleton, data[v.items.end:v.end]...)
	}
	var l struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ListMeta   `json:"metadata"`
		Items           []json.RawMessage `json:"items"`
	}
	strictErrs, err := kjson.UnmarshalStrict(skeleton, &l)
	if err == nil && len(strictErrs) > 0 {
		err = strictErrs[0]
	}
	if err != nil {
		r.bad(problem.Problem{Source: src, Object: problem.Object{APIVersion: tm.APIVersion, Kind: tm.Kind}, Reason: oneLine(err.Error())})
		return true
	}
	r.docs = slices.Grow(r.docs, len(v.elems))
	for i, item := range v.elems {
		r.document(src+"["+strconv.Itoa(i)+"]", data, item)
	}
	return true
}

// validateMeta checks the metadata as the API server does on create.
func validateMeta(src string, id problem.Object, meta *metav1.ObjectMeta, k kind) []problem.Problem {
	errs := apivalidation.ValidateObjectMeta(meta, k.namespaced, k.name, field.NewPath("metadata"))
	if len(errs) == 0 {
		return nil
	}
	// The identity shown for the object is quoted where it is not a valid
	// name: it is the input's text, and must not forge output lines.
	id.Namespace, id.Name = shown(meta.Namespace), shown(meta.Name)
	var out []problem.Problem
	for _, e := range errs {
		p := problem.Problem{Source: src, Object: id, Field: e.Field, Reason: e.Detail}
		if p.Reason == "" {
			p.Reason = e.Type.String()
		}
		if s, ok := e.BadValue.(string); ok && e.Field != "metadata.name" && e.Field != "metadata.namespace" {
			p.Value = s
		}
		out = append(out, p)
	}
	return out
}

// shown is a name as it appears in messages: itself when it is a valid
// name, quoted otherwise.
func shown(name string) string {
	if name == "" || len(apivalidation.NameIsDNSSubdomain(name, false)) == 0 {
		return name
	}
	return problem.Quote(name)
}

// add records an object (or, with problems, its skipping). An object given
// again replaces the earlier one, in its place, with a warning naming both
// places.
func (r *reader) add(src, kind string, obj any, meta *metav1.ObjectMeta, problems []problem.Problem) {
	e := entry{kind: kind, source: src, obj: obj}
	if len(problems) > 0 {
		r.skipped = append(r.skipped, problems...)
		e.obj = nil
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

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// duplicateKey finds the first key given twice in a mapping of a YAML
// document and returns its path (spec.ingress[0].from), for the message:
// the strict parser's error only has a line number.
func duplicateKey(doc []byte) (string, bool) {
	var root yamlv2.MapSlice
	if err := yamlv2.Unmarshal(doc, &root); err != nil {
		return "", false
	}
	return findDuplicate(root, "")
}

func findDuplicate(v any, path string) (string, bool) {
	switch v := v.(type) {
	case yamlv2.MapSlice:
		seen := map[string]bool{}
		for _, item := range v {
			k := fmt.Sprint(item.Key)
			p := k
			if path != "" {
				p = path + "." + k
			}
			if seen[k] {
				return p, true
			}
			seen[k] = true
			if d, ok := findDuplicate(item.Value, p); ok {
				return d, true
			}
		}
	case []any:
		for i, item := range v {
			if d, ok := findDuplicate(item, fmt.Sprintf("%s[%d]", path, i)); ok {
				return d, true
			}
		}
	}
	return "", false
}
