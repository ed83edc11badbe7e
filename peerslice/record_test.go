package peerslice

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/nftguard/nftguard/podset"
)

func TestRecordRoundTrip(t *testing.T) {
	pod := &podset.Pod{Namespace: "ns", Name: "web-1", UID: "u", NodeName: "n2", IPs: []string{"10.0.0.1", "fd00::1"},
		Labels: map[string]string{"app": "web"},
		Ports: []podset.Port{
			{Name: "http", Protocol: corev1.ProtocolTCP, Number: 80},
			{Name: "metrics", Protocol: corev1.ProtocolTCP, Number: 9090},
			{Name: "dns", Protocol: corev1.ProtocolUDP, Number: 53},
		}}
	referenced := func(n string) bool { return n != "metrics" }
	rec := FromPod(pod, referenced)
	want := Peer{Name: "web-1", Node: "n2", IPs: pod.IPs, Labels: pod.Labels, Ports: []Port{{Name: "http", Port: 80}, {Name: "dns", Protocol: "UDP", Port: 53}}}
	if d := cmp.Diff(want, rec); d != "" {
		t.Fatalf("FromPod (-want +got):\n%s", d)
	}
	back := ToPod("ns", &rec)
	wantPod := *pod
	wantPod.UID = ""
	wantPod.Ports = []podset.Port{pod.Ports[0], pod.Ports[2]}
	if d := cmp.Diff(&wantPod, back); d != "" {
		t.Fatalf("ToPod (-want +got):\n%s", d)
	}
}

func TestPublished(t *testing.T) {
	for _, tc := range []struct {
		pod  podset.Pod
		want bool
	}{
		{podset.Pod{IPs: []string{"10.0.0.1"}}, true},
		{podset.Pod{}, false},
		{podset.Pod{IPs: []string{"10.0.0.1"}, Finished: true}, false},
		{podset.Pod{IPs: []string{"10.0.0.1"}, HostNetwork: true}, false},
	} {
		if got := Published(&tc.pod); got != tc.want {
			t.Errorf("Published(%+v) = %v", tc.pod, got)
		}
	}
}

// TestSize: Size is the record's JSON length for ASCII strings.
func TestSize(t *testing.T) {
	for _, p := range []Peer{
		{Name: "a", IPs: []string{"10.0.0.1"}},
		{Name: "web-7d9f8c6b5-x2b9k", Node: "node-17", IPs: []string{"10.1.2.3", "fd00::1:2:3"}, Labels: map[string]string{"app": "web", "pod-template-hash": "7d9f8c6b5"}},
		{Name: "a", IPs: []string{"10.0.0.1"}, Ports: []Port{{Name: "http", Port: 8080}, {Name: "dns", Protocol: "UDP", Port: 53}}},
	} {
		b, err := json.Marshal(&p)
		if err != nil {
			t.Fatal(err)
		}
		// Size counts a separator after every item; JSON has one fewer
		// per list and map.
		if got := Size(&p); got < len(b) || got > len(b)+8 {
			t.Errorf("Size(%s) = %d, JSON is %d bytes", b, got, len(b))
		}
	}
}
