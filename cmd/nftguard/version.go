package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// The release stamp, set by the image build (hack/image, the Dockerfile)
// with -ldflags "-X main.version=... -X main.revision=...": a reproducible
// build uses -buildvcs=false, so the toolchain records no VCS revision, and
// the one the image's annotations name has to reach the binary this way.
// Empty in a plain `go build`, which reports what the toolchain recorded.
var (
	version  string
	revision string
	// modified is "true" when the tree had uncommitted changes.
	modified string
)

// stamp is what the linker set; the zero stamp means none.
type stamp struct{ version, revision, modified string }

// runVersion prints the module version and the VCS revision the binary was
// built from: the release stamp when the build set one, else what the Go
// toolchain recorded.
func runVersion(_ context.Context, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	fmt.Fprintln(stdout, versionText(bi, stamp{version, revision, modified}))
	return nil
}

// versionText is "nftguard VERSION [revision REV [TIME] [(modified)]] GO".
// A stamped version or revision wins over the toolchain's.
func versionText(bi *debug.BuildInfo, st stamp) string {
	if bi == nil && st == (stamp{}) {
		return "nftguard (unknown version: no build information in the binary)"
	}
	settings := map[string]string{}
	var ver, goVersion string
	if bi != nil {
		ver, goVersion = bi.Main.Version, bi.GoVersion
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
	}
	if st.version != "" {
		ver = st.version
	}
	if ver == "" {
		ver = "(devel)"
	}
	if st.revision != "" {
		// The stamp names a commit, not a build time: the image build
		// fixes its time to the commit's, which the revision already is.
		settings = map[string]string{"vcs.revision": st.revision, "vcs.modified": st.modified}
	}
	parts := []string{"nftguard", ver}
	if rev := settings["vcs.revision"]; rev != "" {
		parts = append(parts, "revision", rev)
		if t := settings["vcs.time"]; t != "" {
			parts = append(parts, t)
		}
		if settings["vcs.modified"] == "true" {
			parts = append(parts, "(modified)")
		}
	}
	if goVersion != "" {
		parts = append(parts, goVersion)
	}
	return strings.Join(parts, " ")
}
