package testns

import (
	"os"
	"strings"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/nftguard/nftguard/internal/kerneltest"
)

func TestNamespaceIsPrivateAndRemoved(t *testing.T) {
	kerneltest.Require(t) // before reading the host's ruleset
	host, err := Exec0("nft", "list", "ruleset")
	if err != nil {
		t.Fatal(err)
	}
	var path string
	t.Run("inner", func(t *testing.T) {
		ns := New(t, "self")
		path = ns.Path
		ns.MustExec(t, "table inet probe {\n chain c {\n }\n}\n", "nft", "-f", "-")
		out := ns.MustExec(t, "", "nft", "list", "tables")
		if !strings.Contains(out, "table inet probe") {
			t.Fatalf("table not created inside namespace: %q", out)
		}
		if err := RunIn(ns.Path, func() error { return nil }); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("namespace %s left behind (stat err %v)", path, err)
	}
	after, err := Exec0("nft", "list", "ruleset")
	if err != nil {
		t.Fatal(err)
	}
	if after != host {
		t.Fatalf("host ruleset changed:\nbefore %q\nafter %q", host, after)
	}
}

func TestRefusesOriginNamespace(t *testing.T) {
	h, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := RunIn("/proc/self/ns/net", func() error { return nil }); err == nil {
		t.Fatal("RunIn accepted the test's own namespace")
	}
}
