package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nftguard/nftguard/internal/kerneltest"
)

// TestDemo runs the README's demo end to end: it must succeed and show the
// enforced matrix and the programmed table.
func TestDemo(t *testing.T) {
	kerneltest.Require(t) // the demo builds a lab with netlab.Create
	bin := filepath.Join(t.TempDir(), "nftguard")
	build := exec.Command("go", "build", "-o", bin, "github.com/nftguard/nftguard/cmd/nftguard")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	var out bytes.Buffer
	if err := run(context.Background(), &out, bin, "../examples"); err != nil {
		t.Fatalf("demo failed: %v\noutput:\n%s", err, out.String())
	}
	want := []string{"before: no policy", "matches the expectation", "table inet nftguard {", "np_ing_backend_api", "removed",
		"after: ClusterNetworkPolicies around the NetworkPolicies"}
	want = append(want, "the Admin Deny overrides the NetworkPolicy allow")
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Errorf("demo output lacks %q:\n%s", w, out.String())
		}
	}
}
