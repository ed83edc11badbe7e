package manifest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nftguard/nftguard/problem"
)

// TestLoadJSONOnePass covers what the one-pass JSON reading must keep from
// the decode-everything-twice reading it replaced: the List around the
// items is still read strictly, members are matched after unescaping, and
// anything malformed anywhere is refused, also where nothing is decoded.
func TestLoadJSONOnePass(t *testing.T) {
	const item = `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}`
	for _, tc := range []struct {
		name, in   string
		want       string // counts(); "" when Load must fail
		unreadable []string
	}{
		{name: "List", in: `{"apiVersion":"v1","kind":"List","metadata":{},"items":[` + item + `]}`, want: "N"},
		{name: "items first", in: `{"items":[` + item + `],"kind":"List","apiVersion":"v1"}`, want: "N"},
		{name: "escaped member names", in: `{"\u0061piVersion":"v1","kind":"Lis\u0074","items":[{"apiVersion":"v1","\u006bind":"Namespace","metadata":{"name":"x"}}]}`, want: "N"},
		{name: "List in a List", in: `{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"NamespaceList","items":[` + item + `]}]}`, want: "N"},
		{name: "null items", in: `{"apiVersion":"v1","kind":"List","items":null}`, want: "-"},
		{name: "null item", in: `{"apiVersion":"v1","kind":"List","items":[null,` + item + `]}`, want: "N"},
		{name: "unknown field of the List", in: `{"apiVersion":"v1","kind":"List","itemz":[],"items":[` + item + `]}`,
			unreadable: []string{`a.json:1: List: unknown field "itemz"`}},
		{name: "items given twice", in: `{"apiVersion":"v1","kind":"List","items":[` + item + `],"items":[]}`,
			unreadable: []string{`a.json:1: List: duplicate field "items"`}},
		{name: "items given twice, the array last", in: `{"apiVersion":"v1","kind":"List","items":{},"items":[` + item + `]}`,
			unreadable: []string{`a.json:1: List: `}},
		{name: "items not an array", in: `{"apiVersion":"v1","kind":"List","items":{"a":` + item + `}}`,
			unreadable: []string{`a.json:1: List: json: cannot unmarshal object into Go struct field`}},
		{name: "List metadata of the wrong type", in: `{"apiVersion":"v1","kind":"List","metadata":[],"items":[` + item + `]}`,
			unreadable: []string{`a.json:1: List: json: cannot unmarshal array`}},
		{name: "an item that is not an object", in: `{"apiVersion":"v1","kind":"List","items":[` + item + `,"x"]}`,
			unreadable: []string{`a.json:1[1]: not a Kubernetes object`}},
		{name: "kind not a string", in: `{"apiVersion":"v1","kind":["Namespace"],"metadata":{"name":"x"}}`,
			unreadable: []string{`a.json:1: not a Kubernetes object: kind: not a string`}},
		{name: "syntax error inside a kind nftguard does not read", in: item + ` {"apiVersion":"apps/v1","kind":"Deployment","spec":{"replicas":01}}`,
			unreadable: []string{`a.json:2: not valid JSON: invalid character '1'`}},
		{name: "syntax error in an item", in: `{"apiVersion":"v1","kind":"List","items":[` + item + `,{"kind":"Pod",}]}`,
			unreadable: []string{`a.json:1: not valid JSON`}},
		{name: "control character in a string", in: "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"x\ny\"}}",
			unreadable: []string{`a.json:1: not valid JSON: invalid character '\n' in string literal`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, _, err := Load(strings.NewReader(tc.in), "-")
			if tc.want == "" {
				var ie *InputError
				if !errors.As(err, &ie) {
					t.Fatalf("Load = %v; want an *InputError", err)
				}
				for i := range ie.Problems {
					ie.Problems[i].Source = strings.Replace(ie.Problems[i].Source, "-", "a.json", 1)
				}
				expectAll(t, "unreadable", ie.Problems, tc.unreadable)
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			got := counts(objs)
			if got == "" {
				got = "-"
			}
			if got != tc.want {
				t.Errorf("objects %q, want %q", got, tc.want)
			}
		})
	}
}

// TestLoadManyInOrder: documents are decoded in parallel batches, but
// objects, sources, skipped objects and unreadable documents all come out
// in input order, as they did when decoding was sequential.
func TestLoadManyInOrder(t *testing.T) {
	const n = 5*decodeBatch + 7
	var items []string
	for i := range n {
		name := fmt.Sprintf("p%04d", i)
		if i%97 == 13 {
			name = fmt.Sprintf("Bad%04d", i) // refused by metadata validation: skipped
		}
		items = append(items, fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":"ns"},"spec":{"nodeName":"w1"}}`, name))
	}
	list := `{"apiVersion":"v1","kind":"List","items":[` + strings.Join(items, ",") + `]}`
	objs, skipped, err := Load(strings.NewReader(list), "-")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	var wantSkipped []string
	k := 0
	for i := range n {
		if i%97 == 13 {
			wantSkipped = append(wantSkipped, fmt.Sprintf("-:1[%d]", i))
			continue
		}
		if k >= len(objs.Pods) || objs.Pods[k].Name != fmt.Sprintf("p%04d", i) {
			t.Fatalf("pod %d is not p%04d", k, i)
		}
		if src, want := objs.Source(problem.Object{Kind: "Pod", Namespace: "ns", Name: objs.Pods[k].Name}), fmt.Sprintf("-:1[%d]", i); src != want {
			t.Fatalf("Source(%s) = %q, want %q", objs.Pods[k].Name, src, want)
		}
		k++
	}
	if k != len(objs.Pods) {
		t.Fatalf("%d pods, want %d", len(objs.Pods), k)
	}
	var gotSkipped []string
	for _, p := range skipped {
		gotSkipped = append(gotSkipped, p.Source)
	}
	if strings.Join(gotSkipped, " ") != strings.Join(wantSkipped, " ") {
		t.Errorf("skipped %v, want %v", gotSkipped, wantSkipped)
	}

	// Unreadable documents: every one reported, in input order.
	for _, i := range []int{3, 70, 200, n - 1} {
		items[i] = strings.Replace(items[i], `"spec"`, `"spek"`, 1)
	}
	_, _, err = Load(strings.NewReader(strings.Join(items, "\n")), "-")
	var ie *InputError
	if !errors.As(err, &ie) {
		t.Fatalf("Load = %v; want an *InputError", err)
	}
	var got []string
	for _, p := range ie.Problems {
		got = append(got, p.Source+" "+p.Field)
	}
	want := fmt.Sprintf("-:4 spek -:71 spek -:201 spek -:%d spek", n)
	if strings.Join(got, " ") != want {
		t.Errorf("unreadable %q, want %q", got, want)
	}
}

// TestLoadManyYAMLInOrder: YAML documents are converted in parallel, but
// read in input order: objects, and every unreadable document reported in
// its place, up to a document the splitter cannot read past.
func TestLoadManyYAMLInOrder(t *testing.T) {
	const n = 300
	var docs []string
	for i := range n {
		docs = append(docs, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ns%03d\n", i))
	}
	objs, _, err := Load(strings.NewReader(strings.Join(docs, "---\n")), "-")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	for i, o := range objs.Namespaces {
		if want := fmt.Sprintf("ns%03d", i); o.Name != want {
			t.Fatalf("namespace %d is %s, want %s", i, o.Name, want)
		}
	}
	if len(objs.Namespaces) != n {
		t.Fatalf("%d namespaces, want %d", len(objs.Namespaces), n)
	}
	docs[17] = "kind: [\n"
	docs[150] = strings.Replace(docs[150], "  name:", "  name: a\n  name:", 1)
	docs[299] = "apiVersion: v1\nkind: Namespace\nmetadata: {name: x, lables: {}}\n"
	_, _, err = Load(strings.NewReader(strings.Join(docs, "---\n")), "-")
	var ie *InputError
	if !errors.As(err, &ie) {
		t.Fatalf("Load = %v; want an *InputError", err)
	}
	var got []string
	for _, p := range ie.Problems {
		got = append(got, p.Source+" "+p.Field)
	}
	if want := "-:18  -:151 metadata.name -:300 metadata.lables"; strings.Join(got, " ") != want {
		t.Errorf("unreadable %q, want %q", strings.Join(got, " "), want)
	}
}
