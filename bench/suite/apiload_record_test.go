package main

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nftguard/nftguard/podset"
)

func TestRecordDiff(t *testing.T) {
	base := func() *podset.Pod {
		return &podset.Pod{Namespace: "ns", Name: "p", UID: "u", Labels: map[string]string{"app": "a"}, NodeName: "n",
			IPs: []string{"10.0.0.1"}, Ports: []podset.Port{{Name: "http", Protocol: corev1.ProtocolTCP, Number: 80}}}
	}
	for _, tc := range []struct {
		name   string
		change func(p *podset.Pod) *podset.Pod
		want   []string
	}{
		{"equal", func(p *podset.Pod) *podset.Pod { return p }, nil},
		{"labels removed", func(p *podset.Pod) *podset.Pod {
			p.Labels = nil
			return p
		}, []string{"labels"}},
		{"address added", func(p *podset.Pod) *podset.Pod {
			p.IPs = append(p.IPs, "fd00::1")
			return p
		}, []string{"ips"}},
		{"node and finished", func(p *podset.Pod) *podset.Pod {
			p.NodeName, p.Finished = "m", true
			return p
		}, []string{"node", "finished"}},
		{"port renumbered", func(p *podset.Pod) *podset.Pod {
			p.Ports = []podset.Port{{Name: "http", Protocol: corev1.ProtocolTCP, Number: 81}}
			return p
		}, []string{"ports"}},
		{"gone", func(*podset.Pod) *podset.Pod { return nil }, recordFields},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := recordDiff(base(), tc.change(base())); !slices.Equal(got, tc.want) {
				t.Errorf("recordDiff = %v, want %v", got, tc.want)
			}
		})
	}
	if got := recordDiff(&podset.Pod{}, &podset.Pod{Labels: map[string]string{}}); got != nil {
		t.Errorf("nil and empty labels differ: %v", got)
	}
}

func TestCompactLen(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    podset.Pod
		want int
	}{
		// Four empty strings, three empty lists, the flags byte.
		{"empty", podset.Pod{}, 4 + 3 + 1},
		{"one of each", podset.Pod{Namespace: "ns", Name: "p", UID: "u", NodeName: "n", Labels: map[string]string{"app": "a"},
			IPs: []string{"10.0.0.1"}, Ports: []podset.Port{{Name: "http", Protocol: corev1.ProtocolTCP, Number: 80}}},
			// ns 3, p 2, u 2, n 2; labels 1+4+2; ips 1+9; ports 1+5+4+2; flags 1
			3 + 2 + 2 + 2 + 7 + 10 + 12 + 1},
		{"long name needs a two-byte length", podset.Pod{Name: string(make([]byte, 200))}, 3 + 202 + 3 + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := compactLen(&tc.p); got != tc.want {
				t.Errorf("compactLen = %d, want %d", got, tc.want)
			}
		})
	}
	if got := deleteLen(&podset.Pod{Namespace: "ns", Name: "p"}); got != 5 {
		t.Errorf("deleteLen = %d, want 5", got)
	}
}
