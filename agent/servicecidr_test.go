package agent

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	kubetesting "k8s.io/client-go/testing"
)

// TestServiceCIDRSource: the ranges of ServiceCIDR objects are read and
// followed; a kind the API does not serve, or may not be listed, ends the
// source at once with the flags alone in force (and a forbidden list is
// counted as an error), never blocking.
func TestServiceCIDRSource(t *testing.T) {
	gr := schema.GroupResource{Group: "networking.k8s.io", Resource: "servicecidrs"}
	for _, tc := range []struct {
		name   string
		err    error
		errors float64
	}{
		{"served", nil, 0},
		{"not served", apierrors.NewNotFound(gr, ""), 0},
		{"forbidden", apierrors.NewForbidden(gr, "", nil), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(&networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"},
				Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/16", "fd00:96::/112", "bogus"}}})
			if tc.err != nil {
				client.PrependReactor("list", "servicecidrs", func(kubetesting.Action) (bool, runtime.Object, error) { return true, nil, tc.err })
			}
			var changes atomic.Int32
			m := newMetrics()
			s := newServiceCIDRSource(client, m, slog.New(slog.NewTextHandler(io.Discard, nil)), func(kind string, _ bool) {
				if kind == serviceCIDRKind {
					changes.Add(1)
				}
			})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { s.run(ctx); close(done) }()
			defer func() { cancel(); <-done }()
			// The first sync waits for this, in every case.
			select {
			case <-s.settled:
			case <-time.After(10 * time.Second):
				t.Fatal("the source never settled")
			}
			if tc.err != nil {
				select {
				case <-done:
				case <-time.After(5 * time.Second):
					t.Fatal("the source did not give up")
				}
				if r := s.ranges(); len(r) != 0 {
					t.Errorf("ranges %v, want none", r)
				}
			} else {
				deadline := time.Now().Add(10 * time.Second)
				for len(s.ranges()) == 0 {
					if time.Now().After(deadline) {
						t.Fatal("no ranges read")
					}
					time.Sleep(10 * time.Millisecond)
				}
				if got := s.ranges(); len(got) != 2 || got[0].String() != "10.96.0.0/16" || got[1].String() != "fd00:96::/112" {
					t.Errorf("ranges %v, want 10.96.0.0/16 fd00:96::/112", got)
				}
				if changes.Load() == 0 {
					t.Error("no change reported: the first sync after the list would not read the ranges")
				}
				if _, err := client.NetworkingV1().ServiceCIDRs().Create(ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: "more"},
					Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.97.0.0/16"}}}, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				for len(s.ranges()) != 3 {
					if time.Now().After(deadline) {
						t.Fatalf("ranges %v after a second ServiceCIDR", s.ranges())
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			if v := testutil.ToFloat64(m.errors.WithLabelValues(errorKindServiceCIDR)); v != tc.errors {
				t.Errorf("service_cidr errors %v, want %v", v, tc.errors)
			}
		})
	}
	var nilSource *serviceCIDRSource
	if r := nilSource.ranges(); r != nil {
		t.Errorf("a nil source has ranges %v", r)
	}
}
