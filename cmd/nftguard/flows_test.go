package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/flowlog"
	"github.com/nftguard/nftguard/internal/netlab"
	"github.com/nftguard/nftguard/internal/podtest"
	"github.com/nftguard/nftguard/internal/syncbuf"
	"github.com/nftguard/nftguard/manifest"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/policy"
	"github.com/nftguard/nftguard/tablelayout"
)

// `nftguard flows` in a lab node prints the denied packets of a logged
// namespace's pod with the pods and the policy named from manifests, as
// text and as JSON, and stops after --count flows.
func TestFlowsCommand(t *testing.T) {
	lab := netlab.New(t, netlab.Spec{Nodes: []netlab.NodeSpec{{Name: "n1", Pods: []string{"x/b", "y/a"}}}})
	xb, ya := lab.Endpoint("x/b"), lab.Endpoint("y/a")
	dir := t.TempDir()
	objects := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: x, annotations: {nftguard.io/log-denied: "true"}}
---
apiVersion: v1
kind: Namespace
metadata: {name: "y"}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: x, labels: {pod: b}}
spec: {nodeName: n1, containers: [{name: c, image: i}]}
status: {phase: Running, podIPs: [{ip: %s}, {ip: %s}]}
---
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: "y", labels: {pod: a}}
spec: {nodeName: n1, containers: [{name: c, image: i}]}
status: {phase: Running, podIPs: [{ip: %s}, {ip: %s}]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: in-b, namespace: x}
spec: {podSelector: {matchLabels: {pod: b}}, policyTypes: [Ingress]}
`, xb.IPv4, xb.IPv6, ya.IPv4, ya.IPv6)
	if err := os.WriteFile(filepath.Join(dir, "objects.yaml"), []byte(objects), 0o644); err != nil {
		t.Fatal(err)
	}
	objs, _, err := manifest.Load(nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	l := tablelayout.LogDenied{Group: 1603, Rate: 100, Burst: 100}
	out := policy.Compile(policy.Input{NodeName: "n1", Namespaces: objs.Namespaces, Pods: podtest.Set(objs.Pods), Policies: npset.New(objs.NetworkPolicies), LogDenied: &l})
	eng, err := engine.New(engine.Table{Name: "nftguard"}, engine.WithNetNS(lab.Nodes[0].Path))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := eng.Sync(context.Background(), &engine.Desired{Chains: out.Chains, Sets: out.Sets}); err != nil {
		t.Fatal(err)
	}

	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var stdout, stderr syncbuf.Buffer
			code := make(chan int, 1)
			go func() {
				code <- run(context.Background(), []string{"flows", "--netns", lab.Nodes[0].Path, "--group", "1603",
					"-f", dir, "-o", format, "--count", "2", "--for", "20s", "--pod", "x/b"}, nil, &stdout, &stderr)
			}()
			// Send until the command has printed its two flows: it may
			// not have bound the group yet when the first datagrams go.
			var rc int
		send:
			for {
				if err := lab.Run("y/a", func() error {
					c, err := net.Dial("udp", fmt.Sprintf("%s:81", xb.IPv4))
					if err != nil {
						return err
					}
					defer c.Close()
					_, err = c.Write([]byte("x"))
					return err
				}); err != nil {
					t.Fatal(err)
				}
				select {
				case rc = <-code:
					break send
				case <-time.After(200 * time.Millisecond):
				}
			}
			if rc != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", rc, stdout.String(), stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			if len(lines) != 2 {
				t.Fatalf("%d lines, want 2 (--count 2):\n%s", len(lines), stdout.String())
			}
			t.Logf("flows -o %s:\n%s", format, stdout.String())
			for _, line := range lines {
				if format == "text" {
					want := fmt.Sprintf("denied ingress udp from y/a (%s:", ya.IPv4)
					wantTo := fmt.Sprintf("to x/b (%s:81): pod x/b isolated for ingress by policy in-b; no rule allowed", xb.IPv4)
					if !strings.Contains(line, want) || !strings.HasSuffix(line, wantTo) {
						t.Errorf("line %q, want %q ... %q", line, want, wantTo)
					}
					continue
				}
				var rec flowlog.Record
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("%q: %v", line, err)
				}
				if rec.Direction != flowlog.Ingress || rec.SrcPod != "y/a" || rec.DstPod != "x/b" || rec.DstPort != 81 ||
					rec.Src != ya.IPv4 || strings.Join(rec.Policies, ",") != "x/in-b" {
					t.Errorf("record %+v", rec)
				}
			}
		})
	}

	// A second reader of the group is told who has it.
	r, err := flowlog.Open(flowlog.Config{Group: 1603, NetNS: lab.Nodes[0].Path})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var stdout, stderr syncbuf.Buffer
	if rc := run(context.Background(), []string{"flows", "--netns", lab.Nodes[0].Path, "--group", "1603", "--for", "1s"}, nil, &stdout, &stderr); rc != 1 ||
		!strings.Contains(stderr.String(), "already read by another socket") {
		t.Errorf("flows beside another reader: exit %d, stderr %q", rc, stderr.String())
	}
}
