package agent

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/internal/testns"
)

// A sync's read that fails keeps the interfaces last read (a pod never
// loses its guard because the kernel could not be asked) and is counted;
// the next read that works replaces them.
func TestPodIfKeepsInterfacesWhenReadFails(t *testing.T) {
	node := testns.New(t, "pif")
	p := testns.New(t, "pif")
	node.MustExec(t, "", "ip", "link", "add", "vp0", "type", "veth", "peer", "name", "eth0", "netns", p.Name)
	p.MustExec(t, "", "ip", "addr", "add", "10.1.0.2/32", "dev", "eth0")

	s := newPodIfState(prometheus.NewRegistry(), node.Path, slog.New(slog.DiscardHandler))
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	var in compose.Input
	s.input(&in)
	if !in.PodInterfacesKnown || len(in.PodInterfaces) != 1 || in.PodInterfaces[0].Name != "vp0" {
		t.Fatalf("input: known %v, %v", in.PodInterfacesKnown, in.PodInterfaces)
	}

	s.nsPath = node.Path + "-pif-gone" // every read fails from now on
	in = compose.Input{}
	s.input(&in)
	if !in.PodInterfacesKnown || len(in.PodInterfaces) != 1 || in.PodInterfaces[0].Name != "vp0" {
		t.Errorf("after a failed read: known %v, %v; want vp0 kept", in.PodInterfacesKnown, in.PodInterfaces)
	}
	if n := testutil.ToFloat64(s.readErrors); n != 1 {
		t.Errorf("read errors %v, want 1", n)
	}

	s.nsPath = node.Path
	node.MustExec(t, "", "ip", "link", "del", "vp0")
	in = compose.Input{}
	s.input(&in)
	if !in.PodInterfacesKnown || len(in.PodInterfaces) != 0 {
		t.Errorf("after vp0 was deleted: known %v, %v", in.PodInterfacesKnown, in.PodInterfaces)
	}
	if n := testutil.ToFloat64(s.interfaces); n != 0 {
		t.Errorf("nftguard_pod_interfaces %v, want 0", n)
	}
}

// An unattributed pod is logged once while it stays so, again if it comes
// back; the gauge follows every sync.
func TestPodIfObserveLogsOnce(t *testing.T) {
	var logs bytes.Buffer
	s := newPodIfState(prometheus.NewRegistry(), "", slog.New(slog.NewTextHandler(&logs, nil)))
	for i, c := range []struct {
		unattributed []string
		logged       string // the pods newly logged
	}{
		{[]string{"x/a", "x/b"}, "x/a x/b"},
		{[]string{"x/a", "x/b"}, ""},
		{[]string{"x/b"}, ""},
		{[]string{"x/a", "x/b"}, "x/a"},
		{nil, ""},
	} {
		logs.Reset()
		s.observe(compose.Result{Unattributed: c.unattributed})
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			if _, pod, ok := strings.Cut(l, " pod="); ok {
				got = append(got, pod)
			}
		}
		if strings.Join(got, " ") != c.logged {
			t.Errorf("sync %d: logged %q, want %q", i, got, c.logged)
		}
		if n := testutil.ToFloat64(s.unattributed); n != float64(len(c.unattributed)) {
			t.Errorf("sync %d: nftguard_pods_unattributed %v, want %d", i, n, len(c.unattributed))
		}
	}
}

// The Node's problem exists only while the node has local pods and none
// of them is bound to an interface.
func TestLayoutProblem(t *testing.T) {
	for _, c := range []struct {
		name string
		res  compose.Result
		want bool
	}{
		{"no local pods", compose.Result{}, false},
		{"all bound", compose.Result{Guarded: map[string]string{"x/a": "vp0"}}, false},
		{"some bound", compose.Result{Guarded: map[string]string{"x/a": "vp0"}, Unattributed: []string{"x/b"}}, false},
		{"none bound", compose.Result{Unattributed: []string{"x/a", "x/b"}}, true},
	} {
		ps := layoutProblem("n1", c.res)
		if (len(ps) == 1) != c.want {
			t.Errorf("%s: %v", c.name, ps)
			continue
		}
		if c.want {
			p := ps[0]
			if p.Kind != "Node" || p.Name != "n1" || p.APIVersion != "v1" || !p.Local {
				t.Errorf("%s: %+v", c.name, p)
			}
		}
	}
}

// attachPod gives a node namespace a pod's interface: a veth whose other
// end, in a namespace of its own, holds addr. Agent tests whose nodes run
// pods give them one, or every pod is unattributed (and the Node gets a
// Warning Event of its own).
func attachPod(t *testing.T, node *testns.NS, host, addr string) {
	t.Helper()
	p := testns.New(t, "pif")
	node.MustExec(t, "", "ip", "link", "add", host, "type", "veth", "peer", "name", "eth0", "netns", p.Name)
	p.MustExec(t, "", "ip", "addr", "add", addr+"/32", "dev", "eth0")
}
