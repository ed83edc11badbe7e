package main

import (
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestParseMetrics(t *testing.T) {
	text := `# HELP apiserver_watch_events_sizes [ALPHA] Watch event size distribution in bytes
# TYPE apiserver_watch_events_sizes histogram
apiserver_watch_events_sizes_bucket{group="",resource="pods",version="v1",le="1024"} 3
apiserver_watch_events_sizes_sum{group="",resource="pods",version="v1"} 22394
apiserver_watch_events_sizes_sum{group="nftguard.io",resource="peerslices",version="v1alpha1"} 1.5e+03
apiserver_watch_events_sizes_count{group="",resource="pods",version="v1"} 8
apiserver_request_total{code="201",component="apiserver",resource="peerslices",verb="POST"} 4
apiserver_request_total{code="409",component="apiserver",resource="peerslices",verb="POST"} 1
weird{msg="a \"quoted\" , value}"} 2
plain 7
`
	ss, err := parseMetrics(text)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		match map[string]string
		want  float64
	}{
		{"apiserver_watch_events_sizes_sum", map[string]string{"resource": "pods"}, 22394},
		{"apiserver_watch_events_sizes_sum", map[string]string{"resource": "peerslices"}, 1500},
		{"apiserver_watch_events_sizes_sum", nil, 23894},
		{"apiserver_watch_events_sizes_count", map[string]string{"resource": "pods"}, 8},
		{"apiserver_request_total", map[string]string{"resource": "peerslices", "verb": "POST"}, 5},
		{"apiserver_request_total", map[string]string{"code": "409"}, 1},
		{"apiserver_request_total", map[string]string{"verb": "PUT"}, 0},
		{"weird", map[string]string{"msg": `a "quoted" , value}`}, 2},
		{"plain", nil, 7},
	} {
		if got := sumOf(ss, tc.name, tc.match); got != tc.want {
			t.Errorf("sumOf(%s, %v) = %v, want %v", tc.name, tc.match, got, tc.want)
		}
	}
	for _, bad := range []string{`x{a="b"`, `x{a=b} 1`, `x{a="b"}`, `x notanumber`} {
		if _, err := parseMetrics(bad); err == nil {
			t.Errorf("parseMetrics(%q) read it", bad)
		}
	}
}

func TestReferencedPorts(t *testing.T) {
	named, num := intstr.FromString("http"), intstr.FromInt32(53)
	eg := intstr.FromString("dns")
	nps := []*networkingv1.NetworkPolicy{
		{Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: &named}, {Port: &num}, {}}}}}},
		{Spec: networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: &eg}}}}}},
	}
	got := referencedPorts(nps)
	if len(got) != 2 || !got["http"] || !got["dns"] {
		t.Errorf("referencedPorts = %v, want http and dns", got)
	}
}

func TestQuantile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var out []time.Duration
		for _, n := range ns {
			out = append(out, time.Duration(n)*time.Millisecond)
		}
		return out
	}
	for _, tc := range []struct {
		ds   []time.Duration
		q    float64
		want time.Duration
	}{
		{nil, 0.5, 0},
		{ms(5), 0.99, 5 * time.Millisecond},
		{ms(4, 1, 3, 2), 0.5, 2 * time.Millisecond},
		{ms(4, 1, 3, 2), 1, 4 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.99, 10 * time.Millisecond},
		{ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.9, 9 * time.Millisecond},
	} {
		if got := quantile(tc.ds, tc.q); got != tc.want {
			t.Errorf("quantile(%v, %v) = %v, want %v", tc.ds, tc.q, got, tc.want)
		}
	}
}
