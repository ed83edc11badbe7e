package served

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

func TestVersion(t *testing.T) {
	res := func(gv string, names ...string) *metav1.APIResourceList {
		l := &metav1.APIResourceList{GroupVersion: gv}
		for _, n := range names {
			l.APIResources = append(l.APIResources, metav1.APIResource{Name: n})
		}
		return l
	}
	for _, tc := range []struct {
		name      string
		resources []*metav1.APIResourceList
		fail      error
		want      string
		wantErr   bool
	}{
		{name: "not served", want: ""},
		{name: "preferred version", resources: []*metav1.APIResourceList{res("g/v2", "things"), res("g/v1", "things")}, want: "v2"},
		{name: "older version only", resources: []*metav1.APIResourceList{res("g/v1", "things")}, want: "v1"},
		{name: "group served without the resource", resources: []*metav1.APIResourceList{res("g/v2", "others")}, want: ""},
		{name: "discovery fails", fail: errors.New("connection refused"), wantErr: true},
		{name: "discovery says not found", fail: apierrors.NewNotFound(schema.GroupResource{}, ""), want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: tc.resources}}
			if tc.fail != nil {
				f.PrependReactor("*", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
					return true, nil, tc.fail
				})
			}
			got, err := Version(f, "g", "things", "v2", "v1")
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("Version = %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
