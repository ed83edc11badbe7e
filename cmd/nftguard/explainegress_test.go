package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const egressManifest = `
apiVersion: v1
kind: Pod
metadata: {namespace: x, name: a, labels: {app: web}}
spec: {nodeName: n1, containers: [{name: c, image: i}]}
status: {phase: Running, podIPs: [{ip: 10.244.1.5}]}
---
apiVersion: v1
kind: Service
metadata: {namespace: x, name: web, annotations: {nftguard.io/egress: "true"}}
spec: {type: LoadBalancer, selector: {app: web}, ports: [{port: 80}]}
status: {loadBalancer: {ingress: [{ip: 203.0.113.7}]}}
`

func TestExplainEgress(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(f, []byte(egressManifest), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--to", "198.51.100.1", "--port", "tcp/443"}, []string{"x/a (10.244.1.5) -> 198.51.100.1 tcp/443: leaves with 203.0.113.7", "Service x/web translates", "when it holds 203.0.113.7"}},
		{[]string{"--to", "198.51.100.1", "--node-address", "192.0.2.1"}, []string{"dropped (held)", "not on this node", "egress-node-masquerade"}},
		{[]string{"--to", "10.244.2.1"}, []string{"keeps its own address", "inside the cluster"}},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"explain-egress", "-f", f, "--from", "x/a", "--cluster-cidr", "10.244.0.0/16"}, tc.args...)
		if code := run(context.Background(), args, nil, &out, &errOut); code != exitOK {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out.String(), errOut.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, out.String())
			}
		}
	}
}
