package manifest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkLoad reads a JSON List shaped like bench/suite's synthetic
// cluster (pods/100 namespaces, pods/10 NetworkPolicies, two named
// container ports per pod) as `nftguard apply -f` does. Besides wall time
// it reports the process's CPU time per read (cpu-ms/op, garbage
// collection and every decoding goroutine included), which a shared
// machine disturbs much less.
func BenchmarkLoad(b *testing.B) {
	for _, pods := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("pods=%d", pods), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "cluster.json")
			data := syntheticList(b, pods)
			if err := os.WriteFile(path, data, 0o644); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(data)))
			cpu0 := cpuTime(b)
			for b.Loop() {
				objs, skipped, err := Load(nil, path)
				if err != nil || len(skipped) > 0 || len(objs.Pods) != pods {
					b.Fatalf("Load: %v, %d skipped, %d pods", err, len(skipped), len(objs.Pods))
				}
			}
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
		})
	}
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// syntheticList is a v1 List of namespaces, pods and policies.
func syntheticList(b *testing.B, pods int) []byte {
	b.Helper()
	type obj = map[string]any
	nss := max(pods/100, 1)
	var items []any
	for n := range nss {
		items = append(items, obj{"apiVersion": "v1", "kind": "Namespace",
			"metadata": obj{"name": fmt.Sprintf("ns%04d", n), "labels": obj{"kubernetes.io/metadata.name": fmt.Sprintf("ns%04d", n), "team": fmt.Sprintf("team%d", n%10)}}})
	}
	for i := range pods {
		ip := fmt.Sprintf("10.%d.%d.%d", 1+i>>16, i>>8&255, i&255)
		items = append(items, obj{"apiVersion": "v1", "kind": "Pod",
			"metadata": obj{"name": fmt.Sprintf("pod%06d", i), "namespace": fmt.Sprintf("ns%04d", i%nss), "labels": obj{"app": fmt.Sprintf("app%d", i%10)}},
			"spec": obj{"nodeName": fmt.Sprintf("node-%03d", i%100), "containers": []any{obj{"name": "main", "image": "registry.k8s.io/pause:3.10",
				"ports": []any{obj{"name": "http", "containerPort": 8080, "protocol": "TCP"}, obj{"name": "metrics", "containerPort": 9090, "protocol": "TCP"}}}}},
			"status": obj{"phase": "Running", "podIP": ip, "podIPs": []any{obj{"ip": ip}}}})
	}
	for i := range pods / 10 {
		items = append(items, obj{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
			"metadata": obj{"name": fmt.Sprintf("np%06d", i), "namespace": fmt.Sprintf("ns%04d", i%nss)},
			"spec": obj{"podSelector": obj{"matchLabels": obj{"app": fmt.Sprintf("app%d", i%10)}},
				"ingress": []any{obj{"ports": []any{obj{"protocol": "TCP", "port": 5432}, obj{"protocol": "TCP", "port": "http"}},
					"from": []any{obj{"ipBlock": obj{"cidr": "198.19.0.0/16", "except": []any{"198.19.99.0/24"}}}, obj{"podSelector": obj{"matchLabels": obj{"app": "app2"}}}}}}}})
	}
	data, err := json.Marshal(obj{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		b.Fatal(err)
	}
	return data
}
