package podset

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestNamedPort(t *testing.T) {
	udp, sctp := corev1.ProtocolUDP, corev1.ProtocolSCTP
	always, onFailure := corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicy("OnFailure")
	ctr := func(ports ...corev1.ContainerPort) corev1.Container { return corev1.Container{Ports: ports} }
	sidecar := func(ports ...corev1.ContainerPort) corev1.Container {
		return corev1.Container{Ports: ports, RestartPolicy: &always}
	}
	http := func(n int32) corev1.ContainerPort { return corev1.ContainerPort{Name: "http", ContainerPort: n} }
	app := ctr(http(8080), corev1.ContainerPort{ContainerPort: 9}, corev1.ContainerPort{Name: "dns", ContainerPort: 53, Protocol: udp})
	for _, tc := range []struct {
		name       string
		init, ctrs []corev1.Container
		port       string
		proto      *corev1.Protocol
		want       int32 // 0: not found
	}{
		{"app container", nil, []corev1.Container{app}, "http", nil, 8080},
		{"a plain init container's port is never looked up", []corev1.Container{ctr(http(7000))}, []corev1.Container{app}, "http", nil, 8080},
		{"nor when only it has the name", []corev1.Container{ctr(http(7000))}, []corev1.Container{ctr()}, "http", nil, 0},
		{"an init container with another restart policy is not a sidecar", []corev1.Container{{Ports: []corev1.ContainerPort{http(7000)}, RestartPolicy: &onFailure}}, nil, "http", nil, 0},
		{"containers before sidecars", []corev1.Container{sidecar(http(7000))}, []corev1.Container{app}, "http", nil, 8080},
		{"a sidecar's port when no container has it", []corev1.Container{ctr(http(6000)), sidecar(http(7000))}, []corev1.Container{ctr()}, "http", nil, 7000},
		{"first container in declaration order", nil, []corev1.Container{ctr(http(1)), ctr(http(2))}, "http", nil, 1},
		{"protocol: UDP", nil, []corev1.Container{app}, "dns", &udp, 53},
		{"protocol: unset is TCP", nil, []corev1.Container{app, ctr(corev1.ContainerPort{Name: "dns", ContainerPort: 5353, Protocol: corev1.ProtocolTCP})}, "dns", nil, 5353},
		{"protocol: no SCTP port", nil, []corev1.Container{app}, "dns", &sctp, 0},
		{"missing", nil, []corev1.Container{app}, "missing", nil, 0},
		{"unnamed ports are not kept", nil, []corev1.Container{app}, "", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := FromAPI(&corev1.Pod{Spec: corev1.PodSpec{InitContainers: tc.init, Containers: tc.ctrs}})
			got, ok := pod.NamedPort(tc.port, tc.proto)
			if got != tc.want || ok != (tc.want != 0) {
				t.Errorf("NamedPort(%q, %v) = %d, %v; want %d (ports %v)", tc.port, tc.proto, got, ok, tc.want, pod.Ports)
			}
		})
	}
}

func TestFromAPI(t *testing.T) {
	cases := []struct {
		name string
		in   *corev1.Pod
		want *Pod
	}{
		{"dual stack", &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p", Labels: map[string]string{"app": "x"}, UID: "u"},
			Spec:       corev1.PodSpec{NodeName: "n1"},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "fd00::1"}}},
		}, &Pod{Namespace: "a", Name: "p", UID: "u", Labels: map[string]string{"app": "x"}, NodeName: "n1", IPs: []string{"10.0.0.1", "fd00::1"}}},
		{"older writer: podIP only", &corev1.Pod{Status: corev1.PodStatus{PodIP: "10.0.0.2"}},
			&Pod{IPs: []string{"10.0.0.2"}}},
		{"succeeded", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, &Pod{Finished: true}},
		{"failed", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}, &Pod{Finished: true}},
		{"host network", &corev1.Pod{Spec: corev1.PodSpec{HostNetwork: true}}, &Pod{HostNetwork: true}},
	}
	for _, tc := range cases {
		if diff := cmp.Diff(tc.want, FromAPI(tc.in)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// A record must be keyable by client-go's stores, which the agent's pod
// informer keeps records in.
func TestRecordKeysInClientGoStores(t *testing.T) {
	k, err := cache.MetaNamespaceKeyFunc(&Pod{Namespace: "ns", Name: "p"})
	if err != nil || k != "ns/p" {
		t.Fatalf("key = %q, %v; want ns/p", k, err)
	}
	idx, err := cache.MetaNamespaceIndexFunc(&Pod{Namespace: "ns", Name: "p"})
	if err != nil || !slices.Equal(idx, []string{"ns"}) {
		t.Fatalf("namespace index = %q, %v; want [ns]", idx, err)
	}
}

func names(ps []*Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Key())
	}
	return out
}

func groups(s *Set) map[string][]string {
	out := map[string][]string{}
	for _, g := range s.Groups() {
		out[g.Namespace] = names(g.Items)
	}
	return out
}

// Pods group by namespace (the rest of a Set's behaviour is nsgroup's,
// tested there), and LocalTo answers for each node asked, the last one
// from its kept answer.
func TestSet(t *testing.T) {
	mk := func(ns, name, node string) *Pod { return &Pod{Namespace: ns, Name: name, NodeName: node} }
	b1, a1, b2, c1 := mk("b", "1", "n1"), mk("a", "1", "n2"), mk("b", "2", "n2"), mk("c", "1", "n1")
	s := NewSet([]*Pod{b1, a1, b2, c1})
	want := map[string][]string{"a": {"a/1"}, "b": {"b/1", "b/2"}, "c": {"c/1"}}
	if diff := cmp.Diff(want, groups(s)); diff != "" {
		t.Fatalf("groups (-want +got):\n%s", diff)
	}
	var local []string
	for _, g := range s.Groups() {
		local = append(local, names(LocalTo(g, "n1"))...)
		if got := names(LocalTo(g, "n1")); !slices.Equal(got, names(LocalTo(g, "n1"))) {
			t.Errorf("LocalTo changed between calls: %v", got)
		}
	}
	if !slices.Equal(local, []string{"b/1", "c/1"}) {
		t.Errorf("local to n1 = %v", local)
	}
	if got := names(LocalTo(s.Groups()[1], "n2")); !slices.Equal(got, []string{"b/2"}) {
		t.Errorf("b local to n2 = %v (after asking for n1)", got)
	}
}

func TestConverter(t *testing.T) {
	mk := func(ns, name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	a1, b1, b2 := mk("a", "1"), mk("b", "1"), mk("b", "2")
	var c Converter
	s1 := c.Set([]*corev1.Pod{a1, b1})
	s2 := c.Set([]*corev1.Pod{b1, a1, b2})
	if s1.Groups()[0] != s2.Groups()[0] {
		t.Error("namespace a did not change but has a new Group")
	}
	if s1.Groups()[1] == s2.Groups()[1] {
		t.Error("namespace b changed but kept its Group")
	}
	if s1.Groups()[1].Items[0] != s2.Groups()[1].Items[0] {
		t.Error("the same object b/1 got a new record")
	}
	b1c := b1.DeepCopy()
	s3 := c.Set([]*corev1.Pod{a1, b1c, b2})
	if s3.Groups()[1].Items[0] == s2.Groups()[1].Items[0] {
		t.Error("a new object kept the old record")
	}
	if s4 := c.Set(nil); s4.Len() != 0 {
		t.Errorf("empty list gave %d pods", s4.Len())
	}
}
