package main

import (
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     counts
		exit     int
		shows    []string // in the report
		hides    []string // not in the report
	}{{
		name: "passes and subtests; a PASS printed by a test is not counted",
		in: `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- PASS: fake line\n"}
{"Action":"run","Package":"p","Test":"TestA/x"}
{"Action":"pass","Package":"p","Test":"TestA/x","Elapsed":0}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":0.1}
{"Action":"output","Package":"p","Output":"PASS\n"}
{"Action":"pass","Package":"p","Elapsed":0.2}
{"Action":"skip","Package":"q","Elapsed":0}`,
		want:  counts{passed: 2},
		shows: []string{"ok   p 0.2s", "tests: 2 passed, 0 failed, 0 skipped"},
		hides: []string{"fake line", " q"},
	}, {
		name: "a failure shows its own output, a skip its reason",
		in: `{"Action":"run","Package":"p","Test":"TestF"}
{"Action":"output","Package":"p","Test":"TestF","Output":"    f_test.go:9: want 1, got 2\n"}
{"Action":"fail","Package":"p","Test":"TestF","Elapsed":1.5}
{"Action":"run","Package":"p","Test":"TestS"}
{"Action":"output","Package":"p","Test":"TestS","Output":"    s_test.go:3: kernel test: needs root\n"}
{"Action":"skip","Package":"p","Test":"TestS","Elapsed":0}
{"Action":"fail","Package":"p","Elapsed":2}`,
		want:  counts{failed: 1, skipped: 1, pkgFailed: 1},
		exit:  1,
		shows: []string{"p TestF failed (1.50s)", "want 1, got 2", "p TestS skipped", "needs root", "FAIL p 2.0s", "tests: 0 passed, 1 failed, 1 skipped"},
	}, {
		name: "skips alone",
		in: `{"Action":"skip","Package":"p","Test":"TestS"}
{"Action":"pass","Package":"p","Elapsed":0}`,
		want: counts{skipped: 1},
		exit: 3,
	}, {
		name: "a package that fails outside its tests, and a build failure",
		in: `{"Action":"run","Package":"p","Test":"TestHang"}
{"Action":"output","Package":"p","Output":"panic: test timed out after 1s\n"}
{"Action":"fail","Package":"p","Elapsed":1}
{"ImportPath":"r","Action":"build-output","Output":"r/x.go:1:1: syntax error\n"}
{"ImportPath":"r","Action":"build-fail"}
{"Action":"fail","Package":"r","Elapsed":0,"FailedBuild":"r"}`,
		want:  counts{pkgFailed: 2},
		exit:  1,
		shows: []string{"panic: test timed out", "p TestHang did not finish", "build of r failed", "syntax error", "FAIL r 0.0s (build of r failed)"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			got, err := summarize(strings.NewReader(tc.in), &b)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || got.exitCode() != tc.exit {
				t.Errorf("counts %+v exit %d, want %+v exit %d", got, got.exitCode(), tc.want, tc.exit)
			}
			report := b.String()
			if !strings.HasSuffix(report, got.line()+"\n") {
				t.Errorf("report does not end with the counts line:\n%s", report)
			}
			for _, s := range tc.shows {
				if !strings.Contains(report, s) {
					t.Errorf("report lacks %q:\n%s", s, report)
				}
			}
			for _, s := range tc.hides {
				if strings.Contains(report, s) {
					t.Errorf("report shows %q:\n%s", s, report)
				}
			}
		})
	}
}
