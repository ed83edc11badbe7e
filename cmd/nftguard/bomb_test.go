package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// childEnv makes the test binary run the CLI on its arguments instead of
// the tests: a test that may need a lot of memory if it regresses runs the
// command in a process of its own, under limits that keep it from taking
// the machine's memory.
const childEnv = "NFTGUARD_TEST_CLI_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// runChild runs the CLI with args in a child process whose address space
// is limited to 2 GiB (a Go process reserves far more address space than
// it uses; 1 GiB is sometimes too little to start), and returns its exit
// code, stderr and peak RSS in bytes.
func runChild(t *testing.T, args ...string) (int, string, int64) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", append([]string{"-c", `ulimit -v 2097152 && exec "$0" "$@"`, self}, args...)...)
	cmd.Env = append(os.Environ(), childEnv+"=1", "GOMAXPROCS=2")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("run %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String(), cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss * 1024
}

// TestAliasBomb: a 311 KB manifest whose third document, of a kind
// nftguard ignores, aliases one 10 KB string 100,000 times (a gigabyte of
// JSON once expanded) is unreadable input, named by file and document,
// exit 2, for every command that reads manifests; and it is refused before
// anything is expanded: the process's peak memory is about that of the
// same command on the same document without aliases (a list of 100,000
// numbers), what parsing the input as written costs (both measured 40–55
// MB, most of it the Go runtime and the garbage collector's slack, so the
// bound allows half as much again). Expanded, it would take gigabytes:
// the limit on the child keeps a regression from taking the machine's
// memory.
func TestAliasBomb(t *testing.T) {
	dir := t.TempDir()
	const n = 100000
	head := tNS + "---\n" + tPod + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\ndata:\n"
	bomb := head + "  a: &a \"" + strings.Repeat("x", 10000) + "\"\n  b: [*a" + strings.Repeat(",*a", n-1) + "]\n"
	plain := head + "  b: [1" + strings.Repeat(",1", n-1) + "]\n"
	bombFile, plainFile := filepath.Join(dir, "bomb.yaml"), filepath.Join(dir, "plain.yaml")
	for f, s := range map[string]string{bombFile: bomb, plainFile: plain} {
		if err := os.WriteFile(f, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{
		{"render", "-f", "FILE", "--node-name", "w1"},
		{"apply", "-f", "FILE", "--node-name", "w1", "--netns", noNetNS},
		{"explain", "-f", "FILE", "--from", "shop/cart", "--to", "shop/cart", "--port", "tcp/80"},
		{"doctor", "-f", "FILE", "--netns", noNetNS, "--probe=false"},
	} {
		t.Run(args[0], func(t *testing.T) {
			with := func(file string) []string {
				out := slices.Clone(args)
				out[2] = file
				return out
			}
			code, stderr, rss := runChild(t, with(bombFile)...)
			_, _, plainRSS := runChild(t, with(plainFile)...)
			t.Logf("%d bytes of input: exit %d, peak RSS %d bytes; %d without aliases", len(bomb), code, rss, plainRSS)
			if code != exitUsage || !strings.Contains(stderr, "error: "+bombFile+":3: refused: YAML aliases would expand") || strings.Contains(stderr, "fatal error") {
				t.Errorf("exit %d, want %d with the third document named; stderr:\n%.2000s", code, exitUsage, stderr)
			}
			if rss > plainRSS*3/2 {
				t.Errorf("peak RSS %d bytes, more than 1.5 times the %d of the same input without aliases", rss, plainRSS)
			}
		})
	}
}
