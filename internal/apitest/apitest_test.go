package apitest

import (
	"math/rand"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestBuilders(t *testing.T) {
	for _, c := range []struct {
		name string
		got  any
		want any
	}{
		{"labels", Labels("a", "1", "b", "2"), map[string]string{"a": "1", "b": "2"}},
		{"labels odd key dropped", Labels("a", "1", "b"), map[string]string{"a": "1"}},
		{"labels none", Labels(), map[string]string{}},
		{"namespace", Namespace("x", "ns", "x"), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: map[string]string{"ns": "x"}}}},
		{"selector", Selector("pod", "a"), &metav1.LabelSelector{MatchLabels: map[string]string{"pod": "a"}}},
		{"selector all", Selector(), &metav1.LabelSelector{MatchLabels: map[string]string{}}},
		{"pod", Pod("x", "a", "10.0.0.1"), &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "a", Labels: map[string]string{"pod": "a"}},
			Spec:       corev1.PodSpec{NodeName: "n1"},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}}}}},
		{"pod with every option", Pod("x", "a", "10.0.0.1", OnNode("n2"), IPs("10.0.0.2", "fd00::2"), WithLabels("app", "web"),
			Port("web", 80, corev1.ProtocolTCP), Port("dns", 53, corev1.ProtocolUDP), Phase(corev1.PodPending), HostNetwork()), &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "x", Name: "a", Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{NodeName: "n2", HostNetwork: true, Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{
				{Name: "web", ContainerPort: 80, Protocol: corev1.ProtocolTCP}, {Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending, PodIPs: []corev1.PodIP{{IP: "10.0.0.2"}, {IP: "fd00::2"}}}}},
		{"pod without address", Pod("x", "a", "", IPs()).Status.PodIPs, []corev1.PodIP(nil)},
		{"json", JSON(t, map[string]int{"b": 2, "a": 1}), `{"a":1,"b":2}`},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s:\n got  %#v\n want %#v", c.name, c.got, c.want)
		}
	}
}

// TestMix: a seed replays the same result; over many seeds every kind of
// change happens (kept, changed, dropped, added, shuffled), and nothing
// else: every element of the result is an old one, a changed old one or
// a new one.
func TestMix(t *testing.T) {
	olds, news := []int{1, 2, 3, 4, 5, 6, 7, 8}, []int{100, 101, 102}
	change := func(v int) int { return -v }
	var kept, changed, dropped, added, shuffled bool
	for seed := int64(0); seed < 200; seed++ {
		got := Mix(rand.New(rand.NewSource(seed)), olds, news, 3, change)
		if again := Mix(rand.New(rand.NewSource(seed)), olds, news, 3, change); !slices.Equal(got, again) {
			t.Fatalf("seed %d: %v, then %v", seed, got, again)
		}
		seen := map[int]bool{}
		for _, v := range got {
			switch {
			case v < 0 && slices.Contains(olds, -v):
				changed = true
				seen[-v] = true
			case slices.Contains(olds, v):
				kept = true
				seen[v] = true
			case slices.Contains(news, v):
				added = true
			default:
				t.Fatalf("seed %d: %d in %v is neither old, changed nor new", seed, v, got)
			}
		}
		if len(seen) < len(olds) {
			dropped = true
		}
		if !slices.IsSortedFunc(got, func(a, b int) int { return abs(a) - abs(b) }) {
			shuffled = true
		}
	}
	if !kept || !changed || !dropped || !added || !shuffled {
		t.Errorf("over 200 seeds: kept %v, changed %v, dropped %v, added %v, shuffled %v", kept, changed, dropped, added, shuffled)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
