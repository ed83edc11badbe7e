package agent

import (
	"github.com/google/go-cmp/cmp"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"fmt"
	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/tablelayout"
)

func TestStripPod(t *testing.T) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "x", UID: "u1", ResourceVersion: "7",
			Labels: map[string]string{"pod": "a"}, Annotations: map[string]string{"big": "value"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.PodSpec{NodeName: "n1", HostNetwork: false,
			Containers: []corev1.Container{
				{Name: "app", Image: "img", Command: []string{"serve"}, Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}},
				{Name: "sidecar", Image: "img2"},
			}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.2",
			PodIPs:     []corev1.PodIP{{IP: "10.0.0.2"}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}},
	}
	got, err := strip(p)
	if err != nil {
		t.Fatal(err)
	}
	want := &podset.Pod{Namespace: "x", Name: "a", UID: "u1", Labels: map[string]string{"pod": "a"}, NodeName: "n1",
		IPs: []string{"10.0.0.2"}, Ports: []podset.Port{{Name: "http", Protocol: corev1.ProtocolTCP, Number: 80}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
}

func TestSameContent(t *testing.T) {
	a := stripPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "1"}}, nil)
	b := stripPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "2"},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady}}}}, nil)
	if !sameContent(a, b) {
		t.Error("pods differing only in resource version and conditions are not the same")
	}
	b.Labels = map[string]string{"k": "v"}
	if sameContent(a, b) {
		t.Error("a label change is not a change")
	}
	c := stripPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, nil)
	if sameContent(a, c) {
		t.Error("a finished pod is the same as a running one")
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x", ResourceVersion: "1"}}
	ns2 := ns.DeepCopy()
	ns2.ResourceVersion = "2"
	if !sameContent(ns, ns2) || ns.ResourceVersion != "1" {
		t.Error("namespaces differing only in resource version are not the same, or sameContent changed its argument")
	}
}

func TestStripperSharesLabelSets(t *testing.T) {
	s := newStripper()
	pod := func(name string, l map[string]string) *podset.Pod {
		o, err := s.strip(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "x", Labels: l}})
		if err != nil {
			t.Fatal(err)
		}
		return o.(*podset.Pod)
	}
	a := pod("a", map[string]string{"app": "web", "hash": "1"})
	b := pod("b", map[string]string{"hash": "1", "app": "web"})
	// Encodings that would collide if strings were not length-prefixed.
	c := pod("c", map[string]string{"app": "web1", "hash": ""})
	d := pod("d", map[string]string{"app:3:web": "1"})
	e := pod("e", nil)
	if reflect.ValueOf(a.Labels).UnsafePointer() != reflect.ValueOf(b.Labels).UnsafePointer() {
		t.Error("equal label sets are not shared")
	}
	if !reflect.DeepEqual(a.Labels, map[string]string{"app": "web", "hash": "1"}) ||
		!reflect.DeepEqual(c.Labels, map[string]string{"app": "web1", "hash": ""}) ||
		!reflect.DeepEqual(d.Labels, map[string]string{"app:3:web": "1"}) || e.Labels != nil {
		t.Errorf("labels changed: %v %v %v %v", a.Labels, c.Labels, d.Labels, e.Labels)
	}
	if n := s.liveShared(); n != 3 {
		t.Errorf("%d shared sets, want 3", n)
	}
	// Equal named ports are shared too, in their order.
	ports := func(ps ...corev1.ContainerPort) *podset.Pod {
		o, _ := s.strip(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i", Ports: ps}}}})
		return o.(*podset.Pod)
	}
	http, metrics := corev1.ContainerPort{Name: "http", ContainerPort: 80}, corev1.ContainerPort{Name: "metrics", ContainerPort: 90}
	p1, p2, p3 := ports(http, metrics), ports(http, metrics), ports(metrics, http)
	if &p1.Ports[0] != &p2.Ports[0] || &p1.Ports[0] == &p3.Ports[0] {
		t.Error("equal port lists are not shared, or lists in another order are")
	}
	if !reflect.DeepEqual(p3.Ports, []podset.Port{{Name: "metrics", Protocol: corev1.ProtocolTCP, Number: 90}, {Name: "http", Protocol: corev1.ProtocolTCP, Number: 80}}) {
		t.Errorf("ports = %+v", p3.Ports)
	}
	if n := s.liveShared(); n != 5 {
		t.Errorf("%d shared values, want 5", n)
	}
	// A sweep keeps what cached pods hold and drops the rest: churn must
	// not grow the tables.
	s.sweep([]any{a, p3, "not a pod"})
	if n := s.liveShared(); n != 2 {
		t.Errorf("%d shared values after a sweep keeping two, want 2", n)
	}
	if a2 := pod("a2", map[string]string{"app": "web", "hash": "1"}); reflect.ValueOf(a2.Labels).UnsafePointer() != reflect.ValueOf(a.Labels).UnsafePointer() {
		t.Error("a kept label set is no longer shared")
	}
	if c2 := pod("c2", map[string]string{"app": "web1", "hash": ""}); reflect.ValueOf(c2.Labels).UnsafePointer() == reflect.ValueOf(c.Labels).UnsafePointer() {
		t.Error("a swept label set is still handed out")
	}
	s.sweep(nil)
	if n := s.liveShared(); n != 0 || s.needsSweep() {
		t.Errorf("%d shared values after sweeping with no pods (needsSweep %v)", n, s.needsSweep())
	}
	// needsSweep asks for a sweep once the tables doubled since the last.
	for i := range 1025 {
		pod(fmt.Sprintf("u%d", i), map[string]string{"app": fmt.Sprint(i)})
	}
	if !s.needsSweep() {
		t.Error("1,025 label sets since an empty sweep do not ask for a sweep")
	}
}

func TestStripNamedPorts(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 1}}}},
		Containers: []corev1.Container{
			{Name: "a", Ports: []corev1.ContainerPort{{ContainerPort: 7}, {Name: "http", ContainerPort: 2}, {Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}}},
			{Name: "b", Ports: []corev1.ContainerPort{{Name: "dns", ContainerPort: 54, Protocol: corev1.ProtocolTCP}}},
		}}}
	s := stripPod(p, nil)
	udp := corev1.ProtocolUDP
	for _, c := range []struct {
		name  string
		proto *corev1.Protocol
		want  int32
	}{{"http", nil, 2}, {"dns", &udp, 53}, {"dns", nil, 54}} { // a plain init container's port is never looked up
		got, ok := s.NamedPort(c.name, c.proto)
		if !ok || got != c.want {
			t.Errorf("NamedPort(%s) = %d, %v; want %d", c.name, got, ok, c.want)
		}
	}
	if len(s.Ports) != 3 {
		t.Errorf("ports = %+v, want the containers' three named ones", s.Ports)
	}
}

func TestStripNamespaceKeepsLogOptIn(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"a": "b"},
		Annotations: map[string]string{tablelayout.AnnotationLogDenied: "true", "other": "big"}}}
	o, _ := strip(ns)
	got := o.(*corev1.Namespace)
	if !reflect.DeepEqual(got.Annotations, map[string]string{tablelayout.AnnotationLogDenied: "true"}) || got.Labels["a"] != "b" {
		t.Errorf("namespace = %+v, want labels and only the log-denied annotation", got.ObjectMeta)
	}
}

// TestStripNodeKeepsWhatEgressReads: the addresses and the pod ranges
// (egress learns the cluster's pod ranges from them), not the rest.
func TestStripNodeKeepsWhatEgressReads(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u", ResourceVersion: "3", Labels: map[string]string{"zone": "a"}},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24", "fd00:1::/64"}, ProviderID: "cloud://n1"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.1.1"}},
			Images: []corev1.ContainerImage{{Names: []string{"big"}}}}}
	got, err := strip(n)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u", ResourceVersion: "3", Labels: map[string]string{"zone": "a"}},
		Spec:   corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24", "fd00:1::/64"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.1.1"}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stripped node (-want +got):\n%s", diff)
	}
}
