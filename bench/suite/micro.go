package main

import (
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// microResult is scenario 5: the engine's own go test benchmarks.
type microResult struct {
	Command  string
	Output   string // benchstat-ready
	Duration time.Duration
	Err      error // kept, not fatal: engine/ may be mid-change by others
}

// runMicro runs the existing engine benchmarks with allocation counts,
// three times each so benchstat can compare runs.
func (r *runner) runMicro() microResult {
	args := []string{"test", "./engine/", "-run", "^$", "-bench", r.prof.MicroBench, "-benchmem", "-count", "3"}
	if r.prof.MicroTime != "" {
		args = append(args, "-benchtime", r.prof.MicroTime)
	}
	res := microResult{Command: "go " + strings.Join(args, " ")}
	r.logf("micro: %s", res.Command)
	cmd := exec.CommandContext(r.ctx, "go", args...)
	cmd.Dir = r.root
	start := time.Now()
	out, err := cmd.CombinedOutput()
	res.Duration = time.Since(start)
	res.Output = string(out)
	if err != nil {
		res.Err = fmt.Errorf("%s: %w", res.Command, err)
	}
	return res
}
