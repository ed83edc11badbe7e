package cnpconformance

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	confv1a1 "sigs.k8s.io/network-policy-api/conformance/apis/v1alpha1"
	"sigs.k8s.io/yaml"
)

// The experimental features the driver declares (testdata/driver_test.go.txt),
// which the report must list as supported.
var reportedFeatures = []string{
	"ClusterNetworkPolicyNamedPorts",
	"ClusterNetworkPolicyEgressNodePeers",
	"ClusterNetworkPolicyEgressDomainNames",
}

// implVersion is the version `nftguard version` prints for bin: the main
// module's version the Go toolchain stamped into it. Where the toolchain
// stamps nothing, "(devel)" without a revision (a git worktree, whose .git
// is a file the toolchain does not take for a repository), it is what the
// toolchain stamps for the same tree in a checkout: the pseudo-version
// v0.0.0-COMMITTIME-REVISION12 of the checked-out commit, "+dirty" with
// changes not committed, read from git (gitVersion, or gitErr why not).
func implVersion(t *testing.T, bin, gitVersion string, gitErr error) string {
	t.Helper()
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	fields := strings.Fields(string(out))
	if len(fields) < 2 || fields[0] != "nftguard" {
		t.Fatalf("%s version printed %q", bin, out)
	}
	if fields[1] != "(devel)" || slices.Contains(fields, "revision") {
		return fields[1]
	}
	if gitErr != nil {
		t.Logf("nftguard version says (devel) and git cannot tell the commit: %v", gitErr)
		return fields[1]
	}
	return gitVersion
}

// gitPseudoVersion is the Go toolchain's stamp for the module's checkout.
func gitPseudoVersion() (string, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "TZ=UTC")
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	line, err := git("log", "-1", "--format=%H %cd", "--date=format-local:%Y%m%d%H%M%S")
	if err != nil {
		return "", err
	}
	rev, when, ok := strings.Cut(line, " ")
	if !ok || len(rev) < 12 || len(when) != 14 {
		return "", fmt.Errorf("git log printed %q", line)
	}
	status, err := git("status", "--porcelain")
	if err != nil {
		return "", err
	}
	return pseudoVersion(rev, when, status != ""), nil
}

func pseudoVersion(rev, commitTime string, dirty bool) string {
	v := "v0.0.0-" + commitTime + "-" + rev[:12]
	if dirty {
		v += "+dirty"
	}
	return v
}

// checkReport reads the report the driver wrote and checks that it says
// what the run did: nftguard at version, the ClusterNetworkPolicy profile
// passed at both levels with the declared experimental features, and as
// many tests passed as the run's top-level tests. It returns a summary.
func checkReport(path, version string, res *suiteResult) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var r confv1a1.ConformanceReport
	if err := yaml.UnmarshalStrict(data, &r); err != nil {
		return "", fmt.Errorf("parse: %w", err)
	}
	return summarizeReport(&r, version, res.topPassed())
}

func summarizeReport(r *confv1a1.ConformanceReport, version string, passed int) (string, error) {
	var errs []error
	if r.Kind != "ConformanceReport" || r.Organization != implOrganization || r.Project != implProject || r.Version != version {
		errs = append(errs, fmt.Errorf("kind %q, implementation %s/%s %s; want ConformanceReport, %s/%s %s",
			r.Kind, r.Organization, r.Project, r.Version, implOrganization, implProject, version))
	}
	if len(r.ProfileReports) != 1 || r.ProfileReports[0].Name != "ClusterNetworkPolicy" {
		return "", errors.Join(append(errs, fmt.Errorf("profiles %+v, want ClusterNetworkPolicy alone", r.ProfileReports))...)
	}
	p := r.ProfileReports[0]
	if p.Standard.Result != confv1a1.Success {
		errs = append(errs, fmt.Errorf("standard result %q (%s), failed %v, skipped %v", p.Standard.Result, p.Standard.Summary, p.Standard.FailedTests, p.Standard.SkippedTests))
	}
	exp := p.Experimental
	if exp == nil {
		return "", errors.Join(append(errs, errors.New("no experimental results"))...)
	}
	if exp.Result != confv1a1.Success {
		errs = append(errs, fmt.Errorf("experimental result %q (%s), failed %v, skipped %v", exp.Result, exp.Summary, exp.FailedTests, exp.SkippedTests))
	}
	for _, f := range reportedFeatures {
		if !slices.Contains(exp.SupportedFeatures, f) {
			errs = append(errs, fmt.Errorf("experimental feature %s not listed as supported (%v)", f, exp.SupportedFeatures))
		}
	}
	if len(exp.UnsupportedFeatures) > 0 {
		errs = append(errs, fmt.Errorf("experimental features listed as unsupported: %v", exp.UnsupportedFeatures))
	}
	if got := int(p.Standard.Passed + exp.Passed); got != passed {
		errs = append(errs, fmt.Errorf("%d tests passed in the report, %d in the run", got, passed))
	}
	if len(errs) > 0 {
		return "", errors.Join(errs...)
	}
	return fmt.Sprintf("nftguard %s, bundle %s, profile %s: standard %s (%d passed), experimental %s (%d passed; %s)",
		r.Version, r.NetworkPolicyBundleVersion, p.Name, p.Standard.Result, p.Standard.Passed,
		exp.Result, exp.Passed, strings.Join(exp.SupportedFeatures, ", ")), nil
}
