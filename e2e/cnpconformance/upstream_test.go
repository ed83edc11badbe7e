package cnpconformance

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The files the harness adds to its copy of the upstream module; all are
// nftguard's own code, kept as text so the Go tools of this module ignore
// them.
var (
	//go:embed testdata/exec_bridge.go.txt
	execBridgeSrc []byte
	//go:embed testdata/driver_test.go.txt
	driverSrc []byte
	//go:embed testdata/features.go.txt
	featuresSrc []byte
	//go:embed testdata/domain_names.go.txt
	domainNamesSrc []byte
	//go:embed testdata/experimental-egress-domain-names.yaml
	domainNamesManifest []byte
)

// Where they go in the copy, and what is patched.
const (
	helperPath     = "conformance/utils/kubernetes/helper.go"
	execBridgePath = "conformance/utils/kubernetes/zz_nftguard_exec.go"
	driverDir      = "conformance/nftguard"
	driverPath     = driverDir + "/nftguard_test.go"
	driverTest     = "TestNftguardConformance"

	// The domain names feature, test and manifest, where upstream keeps
	// its own (the manifest is embedded with base/ when the copy builds).
	featuresPath            = "conformance/utils/suite/zz_nftguard_features.go"
	domainNamesPath         = "conformance/tests/nftguard-admin-network-policy-experimental-egress-domain-names.go"
	domainNamesManifestPath = "conformance/base/admin_tier/experimental-egress-domain-names.yaml"

	// patchedFunc must keep exactly this signature, and its body must be
	// the SPDY exec it is meant to replace; otherwise upstream changed and
	// the patch must be looked at again, not applied blindly.
	patchedFunc      = "RunCommandFromPod"
	patchedSignature = "func RunCommandFromPod(client k8sclient.Interface, kubeConfig *rest.Config, podNamespace, podName string, cmd []string) (stdout string, stderr string, err error)"
	patchedBodyMark  = "remotecommand.NewSPDYExecutor"
	// The replacement body: the container name is derived as upstream
	// derives it, the rest is testdata/exec_bridge.go.txt.
	bridgeBody = `{
	// Patched by nftguard's conformance harness: the command runs in the
	// pod's network namespace via the harness (zz_nftguard_exec.go), not
	// through a kubelet.
	containerName := podName[:len(podName)-1] + "client"
	return nftguardExec(podNamespace, podName, containerName, cmd)
}`
)

// patchRunCommand replaces RunCommandFromPod's body in helper.go's source
// with bridgeBody and drops the imports only the old body used. It fails,
// naming what differs, when the function is not the one it expects.
func patchRunCommand(src []byte) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "helper.go", src, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("parse helper.go: %w", err)
	}
	var fn *ast.FuncDecl
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == patchedFunc {
			fn = fd
		}
	}
	if fn == nil || fn.Body == nil {
		return nil, fmt.Errorf("helper.go has no function %s: upstream changed, review the patch", patchedFunc)
	}
	start := fset.Position(fn.Pos()).Offset
	lbrace := fset.Position(fn.Body.Lbrace).Offset
	rbrace := fset.Position(fn.Body.Rbrace).Offset
	if sig := strings.TrimSpace(string(src[start:lbrace])); sig != patchedSignature {
		return nil, fmt.Errorf("%s signature changed upstream:\n got: %s\nwant: %s", patchedFunc, sig, patchedSignature)
	}
	oldBody := string(src[lbrace : rbrace+1])
	if !strings.Contains(oldBody, patchedBodyMark) {
		return nil, fmt.Errorf("%s no longer calls %s: upstream changed, review the patch", patchedFunc, patchedBodyMark)
	}
	// Imports the old body used are candidates for removal.
	candidates := map[string]bool{}
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				candidates[id.Name] = true
			}
		}
		return true
	})
	out := slices.Concat(src[:lbrace], []byte(bridgeBody), src[rbrace+1:])
	out, err = dropUnusedImports(out, candidates)
	if err != nil {
		return nil, err
	}
	formatted, err := format.Source(out)
	if err != nil {
		return nil, fmt.Errorf("patched helper.go does not format: %w", err)
	}
	return formatted, nil
}

// dropUnusedImports removes the imports named in candidates (by the name
// the file refers to them with) that no selector in src uses any more.
func dropUnusedImports(src []byte, candidates map[string]bool) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "helper.go", src, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("parse patched helper.go: %w", err)
	}
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				used[id.Name] = true
			}
		}
		return true
	})
	type span struct{ from, to int }
	var cut []span
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			return nil, err
		}
		name := filepath.Base(path)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if !candidates[name] || used[name] {
			continue
		}
		// Cut the whole line the import spec is on.
		from := fset.Position(imp.Pos()).Offset
		for from > 0 && src[from-1] != '\n' {
			from--
		}
		to := fset.Position(imp.End()).Offset
		for to < len(src) && src[to] != '\n' {
			to++
		}
		cut = append(cut, span{from, min(to+1, len(src))})
	}
	sort.Slice(cut, func(i, j int) bool { return cut[i].from > cut[j].from })
	out := slices.Clone(src)
	for _, c := range cut {
		out = slices.Delete(out, c.from, c.to)
	}
	return out, nil
}

// prepareUpstream copies the module at modDir into dst (writable), patches
// RunCommandFromPod and adds the exec bridge, the domain names feature,
// test and manifest, and the driver test.
func prepareUpstream(modDir, dst string) error {
	err := filepath.WalkDir(modDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(modDir, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		return copyFile(path, target)
	})
	if err != nil {
		return fmt.Errorf("copy %s: %w", modDir, err)
	}
	helper := filepath.Join(dst, helperPath)
	src, err := os.ReadFile(helper)
	if err != nil {
		return err
	}
	patched, err := patchRunCommand(src)
	if err != nil {
		return err
	}
	if err := os.WriteFile(helper, patched, 0o644); err != nil {
		return err
	}
	for path, data := range map[string][]byte{
		execBridgePath:          execBridgeSrc,
		featuresPath:            featuresSrc,
		domainNamesPath:         domainNamesSrc,
		domainNamesManifestPath: domainNamesManifest,
	} {
		target := filepath.Join(dst, path)
		if _, err := os.Stat(target); err == nil {
			return fmt.Errorf("%s exists upstream: review the harness's additions", path)
		}
		if err := os.WriteFile(target, data, 0o644); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(dst, driverDir), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dst, driverPath), driverSrc, 0o644)
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// testEvent is one line of `go test -json` (test2json) output.
type testEvent struct {
	Action  string
	Test    string
	Output  string
	Elapsed float64
}

// suiteResult summarises an upstream run.
type suiteResult struct {
	Passed, Failed, Skipped []string // test names, subtests included
	PackageFailed           bool     // the test binary itself failed
	Output                  map[string]*strings.Builder
	// Failed tests by the kind of probe failure that ended them (from
	// the upstream log lines): an allowed connection blocked, a denied one
	// let through, a denied one answered with something other than
	// TIMEOUT, an exec that failed.
	AllowBlocked, DenyLetThrough, DenyWrongStatus, ExecFailed int
}

// Tests reports how many test results the run had.
func (r *suiteResult) Tests() int { return len(r.Passed) + len(r.Failed) + len(r.Skipped) }

// OK is true when the run passed in full: something ran, nothing failed,
// nothing was skipped.
func (r *suiteResult) OK() bool {
	return r.Tests() > 0 && len(r.Failed) == 0 && len(r.Skipped) == 0 && !r.PackageFailed
}

// parseTestJSON reads test2json events. Lines that are not JSON (a build
// error, a crash before the first event) fail the package.
func parseTestJSON(r io.Reader) (*suiteResult, error) {
	res := &suiteResult{Output: map[string]*strings.Builder{}}
	lastKind := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var ev testEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			res.PackageFailed = true
			b := res.Output[""]
			if b == nil {
				b = &strings.Builder{}
				res.Output[""] = b
			}
			b.Write(line)
			b.WriteByte('\n')
			continue
		}
		switch ev.Action {
		case "output":
			b := res.Output[ev.Test]
			if b == nil {
				b = &strings.Builder{}
				res.Output[ev.Test] = b
			}
			b.WriteString(ev.Output)
			if kind := probeFailureKind(ev.Output); kind != "" {
				lastKind[ev.Test] = kind
			}
		case "pass", "fail", "skip":
			if ev.Test == "" {
				if ev.Action == "fail" {
					res.PackageFailed = true
				}
				continue
			}
			switch ev.Action {
			case "pass":
				res.Passed = append(res.Passed, ev.Test)
			case "fail":
				res.Failed = append(res.Failed, ev.Test)
				// A failed probe ends its subtest: the last probe
				// failure logged there is why it failed.
				switch lastKind[ev.Test] {
				case "allow":
					res.AllowBlocked++
				case "deny":
					res.DenyLetThrough++
				case "status":
					res.DenyWrongStatus++
				case "exec":
					res.ExecFailed++
				}
			case "skip":
				res.Skipped = append(res.Skipped, ev.Test)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return res, fmt.Errorf("read test output: %w", err)
	}
	return res, nil
}

// probeFailureKind classifies one upstream log line of a failed probe.
func probeFailureKind(line string) string {
	switch {
	case strings.Contains(line, "Expected connection to succeed"):
		return "allow"
	case strings.Contains(line, "Expected connection to fail") && strings.Contains(line, "successfully connected"):
		return "deny"
	case strings.Contains(line, "Expected connection to be dropped"):
		return "status"
	case strings.Contains(line, "FAILED to execute command"):
		return "exec"
	}
	return ""
}

// topLevel counts the upstream conformance tests (not their subtests) in
// names.
func topLevel(names []string) int {
	n := 0
	for _, t := range names {
		if strings.Count(t, "/") == 1 {
			n++
		}
	}
	return n
}

// topPassed is how many upstream conformance tests passed.
func (r *suiteResult) topPassed() int { return topLevel(r.Passed) }

// Summary is the one-line result the outer test logs.
func (r *suiteResult) Summary(wall time.Duration) string {
	top := topLevel
	return fmt.Sprintf("upstream conformance: %d passed, %d failed, %d skipped (conformance tests: %d passed, %d failed, %d skipped; subtests included in the first counts) in %v; tests failed by an allowed probe blocked: %d, a denied probe let through: %d, a denied probe not TIMEOUT: %d, an exec error: %d",
		len(r.Passed), len(r.Failed), len(r.Skipped), top(r.Passed), top(r.Failed), top(r.Skipped),
		wall.Round(time.Second), r.AllowBlocked, r.DenyLetThrough, r.DenyWrongStatus, r.ExecFailed)
}

// errNoTests is returned when a filter matched nothing.
var errNoTests = errors.New("the upstream run reported no test results")
