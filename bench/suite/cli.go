package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// nftguard runs the built binary on a manifest for the benchmarked node
// and returns its stdout. Any stderr line (a skipped object, a warning)
// fails the run: the benchmark must program the whole synthetic cluster.
func (r *runner) nftguard(manifest, sub string, args ...string) (string, error) {
	args = append([]string{sub, "-f", manifest, "--node-name", localNode}, args...)
	cmd := exec.CommandContext(r.ctx, r.bin, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("nftguard %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	if s := expectedWarnings(stderr.String()); s != "" {
		return "", fmt.Errorf("nftguard %s: unexpected stderr: %s", sub, s)
	}
	return strings.TrimSpace(stdout.String()), nil
}

// render is `nftguard render`: the nft script of the same table apply
// programs.
func (r *runner) render(manifest string) (string, error) {
	return r.nftguard(manifest, "render")
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// expectedWarnings is stderr without the one warning every apply of the
// synthetic cluster gives: its pods have no interfaces in the lab node
// (nothing to guard them by), which the benchmarks do not measure.
func expectedWarnings(stderr string) string {
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if !strings.Contains(l, "have no interface of their own in the node's network namespace") {
			keep = append(keep, l)
		}
	}
	return strings.TrimSpace(strings.Join(keep, "\n"))
}
