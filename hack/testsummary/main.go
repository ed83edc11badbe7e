// Command testsummary reads `go test -json` on stdin and keeps a long run
// readable: it prints each package's result as it arrives, the output of
// every failed test (its context), every skip with its reason, the output
// of a package that failed outside any test (a build error, a TestMain that
// exited, a timeout), and last one line that CI and people read:
//
//	tests: N passed, N failed, N skipped
//
// Counts are of tests and subtests, from the events' actions, so a test
// that prints "--- PASS" in its own output is not counted. It exits 1 if a
// test or a package failed, 3 if nothing failed but a test was skipped (the
// caller decides what a skip means), and 0 otherwise. hack/gotest runs it.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
)

func main() {
	s, err := summarize(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	os.Exit(s.exitCode())
}

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string // build-output and build-fail events
	FailedBuild string // a package's fail caused by a build failure
}

type counts struct {
	passed, failed, skipped int
	pkgFailed               int // packages that failed, with or without a failed test
}

func (c counts) exitCode() int {
	switch {
	case c.failed > 0 || c.pkgFailed > 0:
		return 1
	case c.skipped > 0:
		return 3
	}
	return 0
}

func (c counts) line() string {
	return fmt.Sprintf("tests: %d passed, %d failed, %d skipped", c.passed, c.failed, c.skipped)
}

// pkgTail is how many of a failed package's own output lines are shown.
const pkgTail = 200

// summarize reads events from r, reports to w as they come, and writes the
// closing counts line.
func summarize(r io.Reader, w io.Writer) (counts, error) {
	var c counts
	type key struct{ pkg, test string }
	out := map[key][]string{}       // output of tests still running
	pkgOut := map[string][]string{} // a package's output outside its tests, last pkgTail lines
	build := map[string][]string{}  // build output by import path
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil {
			// go test writes a few lines that are not JSON (e.g. a
			// panic of the go command itself): pass them through.
			fmt.Fprintln(w, string(line))
			continue
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "build-output":
			build[e.ImportPath] = append(build[e.ImportPath], e.Output)
		case "build-fail":
			fmt.Fprintf(w, "== build of %s failed ==\n", e.ImportPath)
			for _, l := range build[e.ImportPath] {
				fmt.Fprint(w, l)
			}
		case "run":
			out[k] = nil // known from now on, even if it prints nothing
		case "output":
			if e.Test != "" {
				out[k] = append(out[k], e.Output)
				continue
			}
			p := append(pkgOut[e.Package], e.Output)
			if len(p) > pkgTail {
				p = p[len(p)-pkgTail:]
			}
			pkgOut[e.Package] = p
		case "pass", "fail", "skip":
			if e.Test == "" {
				reportPackage(w, e, pkgOut[e.Package], &c)
				delete(pkgOut, e.Package)
				// Tests that never ended: the test binary died under
				// them (a timeout's panic names them too).
				var unfinished []string
				for u := range out {
					if u.pkg == e.Package {
						unfinished = append(unfinished, u.test)
					}
				}
				sort.Strings(unfinished)
				for _, name := range unfinished {
					u := key{e.Package, name}
					fmt.Fprintf(w, "== %s %s did not finish ==\n", u.pkg, u.test)
					for _, l := range out[u] {
						fmt.Fprint(w, l)
					}
					delete(out, u)
				}
				continue
			}
			switch e.Action {
			case "pass":
				c.passed++
			case "fail":
				c.failed++
				fmt.Fprintf(w, "== %s %s failed (%.2fs) ==\n", e.Package, e.Test, e.Elapsed)
				for _, l := range out[k] {
					fmt.Fprint(w, l)
				}
			case "skip":
				c.skipped++
				fmt.Fprintf(w, "== %s %s skipped ==\n", e.Package, e.Test)
				for _, l := range out[k] {
					fmt.Fprint(w, l)
				}
			}
			delete(out, k)
		}
	}
	if err := sc.Err(); err != nil {
		return c, fmt.Errorf("reading go test -json: %w", err)
	}
	fmt.Fprintln(w, c.line())
	return c, nil
}

// reportPackage prints a package's result line, and when it failed, its
// output outside any test.
func reportPackage(w io.Writer, e event, tail []string, c *counts) {
	switch e.Action {
	case "pass":
		fmt.Fprintf(w, "ok   %s %.1fs\n", e.Package, e.Elapsed)
	case "skip":
		// No test files, or none matched: nothing ran, nothing to count.
	case "fail":
		c.pkgFailed++
		why := ""
		if e.FailedBuild != "" {
			why = " (build of " + e.FailedBuild + " failed)"
		}
		fmt.Fprintf(w, "FAIL %s %.1fs%s\n", e.Package, e.Elapsed, why)
		if len(tail) > 0 {
			fmt.Fprintf(w, "== %s output outside its tests (last %d lines) ==\n", e.Package, len(tail))
			for _, l := range tail {
				fmt.Fprint(w, l)
			}
		}
	}
}
