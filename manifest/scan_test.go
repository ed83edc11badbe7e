package manifest

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestScanValid(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{`{}`, true},
		{` { "a" : [ 1 , -2.5e+3 , 0 , true , false , null , "x\"\\\/\b\f\n\r\t\u00e9" ] } `, true},
		{`[[[[]]]]`, true},
		{`"\ud83d\ude00"`, true},
		{"\"caf\xc3\xa9\"", true},
		{"\"\xff\"", true}, // invalid UTF-8 is accepted (and replaced) by encoding/json
		{`-0.0E-0`, true},
		{`{"a":1,}`, false},
		{`[1,]`, false},
		{`{"a" 1}`, false},
		{`{a:1}`, false},
		{`{"a":1`, false},
		{`[1 2]`, false},
		{`01`, false},
		{`1.`, false},
		{`.5`, false},
		{`-`, false},
		{`1e`, false},
		{`+1`, false},
		{`tru`, false},
		{`nul`, false},
		{`trUe`, false},
		{`"\x"`, false},
		{`"\u12G4"`, false},
		{`"\u12"`, false},
		{"\"a\nb\"", false},
		{`"abc`, false},
		{`"abc\`, false},
		{`{"a":"b"}}`, false},
		{`'a'`, false},
		{strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth), true},
		{strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1), false},
	} {
		_, ok, err := scanOne([]byte(tc.in))
		got := ok && err == nil
		if got != tc.want {
			t.Errorf("scanOne(%q) = %v, %v; want valid %v", tc.in, ok, err, tc.want)
		}
		if std := json.Valid([]byte(tc.in)); std != tc.want {
			t.Errorf("fixture %q: encoding/json says valid %v", tc.in, std)
		}
		var se *syntaxError
		if err != nil && !errors.As(err, &se) {
			t.Errorf("scanOne(%q): error %T, want *syntaxError", tc.in, err)
		}
	}
}

func TestScanStream(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string // each value's text
		bad  bool
	}{
		{in: ``, want: nil},
		{in: " \n\t", want: nil},
		{in: `{"a":1}{"b":2}`, want: []string{`{"a":1}`, `{"b":2}`}},
		{in: `{"a":1} null [1] 2 "x"`, want: []string{`{"a":1}`, `null`, `[1]`, `2`, `"x"`}},
		{in: `{"a":1} {"b":`, want: []string{`{"a":1}`}, bad: true},
		{in: `{} x`, want: []string{`{}`}, bad: true},
	} {
		vs, err := scanStream([]byte(tc.in))
		if (err != nil) != tc.bad {
			t.Errorf("scanStream(%q) error %v, want error %v", tc.in, err, tc.bad)
		}
		var got []string
		for _, v := range vs {
			got = append(got, tc.in[v.start:v.end])
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("scanStream(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestScanProbe: the members the reader dispatches on are found the way a
// decoder finds them: after unescaping, case-sensitively, the last of
// repeated ones, only at the top of a document or List item.
func TestScanProbe(t *testing.T) {
	for _, tc := range []struct {
		name, in         string
		apiVersion, kind string
		kindErr          bool
		items            int // elements; -1: items is not an array
	}{
		{name: "plain", in: `{"apiVersion":"v1","kind":"Pod","metadata":{"kind":"no"}}`, apiVersion: "v1", kind: "Pod", items: -1},
		{name: "escaped key and value", in: `{"\u0061piVersion":"v\u0031","kind":"P\u006fd"}`, apiVersion: "v1", kind: "Pod", items: -1},
		{name: "case-sensitive", in: `{"Kind":"Pod","APIVERSION":"v1"}`, items: -1},
		{name: "the last one counts", in: `{"kind":"Pod","kind":"Node"}`, kind: "Node", items: -1},
		{name: "null is empty", in: `{"kind":null}`, items: -1},
		{name: "not a string", in: `{"kind":3}`, kindErr: true, items: -1},
		{name: "nested members are not the document's", in: `{"spec":{"kind":"Pod","items":[1]}}`, items: -1},
		{name: "list", in: `{"apiVersion":"v1","kind":"List","items":[{"kind":"A"},2,{"kind":"B","items":[{"kind":"C"}]}]}`, apiVersion: "v1", kind: "List", items: 3},
		{name: "items not an array", in: `{"kind":"List","items":{"a":1}}`, kind: "List", items: -1},
		{name: "items array then not", in: `{"kind":"List","items":[{}],"items":null}`, kind: "List", items: -1},
		{name: "non-ASCII value", in: "{\"kind\":\"P\xc3\xb6d\"}", kind: "Pöd", items: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.in)
			v, ok, err := scanOne(data)
			if !ok || err != nil {
				t.Fatalf("scanOne: %v %v", ok, err)
			}
			if !v.object {
				t.Fatalf("not an object")
			}
			if av, _ := text(data, v.apiVersion); av != tc.apiVersion {
				t.Errorf("apiVersion %q, want %q", av, tc.apiVersion)
			}
			k, err := text(data, v.kind)
			if (err != nil) != tc.kindErr || k != tc.kind {
				t.Errorf("kind %q, %v; want %q, error %v", k, err, tc.kind, tc.kindErr)
			}
			n := -1
			if v.itemsArray {
				n = len(v.elems)
			}
			if n != tc.items {
				t.Fatalf("items %d, want %d", n, tc.items)
			}
			if tc.name == "list" {
				// Elements are probed too, a List in a List included.
				if k, _ := text(data, v.elems[0].kind); k != "A" || v.elems[1].object {
					t.Errorf("elements not probed: %q %v", k, v.elems[1].object)
				}
				inner := v.elems[2]
				if k, _ := text(data, inner.elems[0].kind); !inner.itemsArray || k != "C" {
					t.Errorf("inner list not probed")
				}
				if got := tc.in[v.items.start:v.items.end]; !strings.HasPrefix(got, "[{") || !strings.HasSuffix(got, "}]}]") {
					t.Errorf("items span %q", got)
				}
			}
		})
	}
}

// FuzzScan: the scanner accepts exactly what encoding/json accepts, and a
// value it finds spans exactly the input's value.
func FuzzScan(f *testing.F) {
	for _, s := range []string{`{}`, `{"kind":"List","items":[{"a":[1,2.5e3,"x\u0041"]},null]}`, `[1,]`, `"\ud800"`, `-0`, `01`, "\"\x01\"", `{"a":tru}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, ok, err := scanOne(data)
		valid := ok && err == nil
		if valid != json.Valid(data) {
			t.Fatalf("scanOne(%q) valid %v (%v), encoding/json says %v", data, valid, err, json.Valid(data))
		}
		if valid && strings.TrimSpace(string(data)) != string(data[v.start:v.end]) {
			t.Fatalf("span %q of %q", data[v.start:v.end], data)
		}
	})
}
