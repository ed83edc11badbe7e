package manifest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"

	"github.com/nftguard/nftguard/problem"
)

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
