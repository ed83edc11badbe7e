package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// runVersion prints the module version and the VCS revision the binary was
// built from, as the Go toolchain recorded them.
func runVersion(_ context.Context, args []string, _ io.Reader, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	fmt.Fprintln(stdout, versionText(bi))
	return nil
}

// versionText is "nftguard VERSION [revision REV [TIME] [modified]] GO".
func versionText(bi *debug.BuildInfo) string {
	if bi == nil {
		return "nftguard (unknown version: no build information in the binary)"
	}
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	parts := []string{"nftguard", version}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; rev != "" {
		parts = append(parts, "revision", rev)
		if t := settings["vcs.time"]; t != "" {
			parts = append(parts, t)
		}
		if settings["vcs.modified"] == "true" {
			parts = append(parts, "(modified)")
		}
	}
	if bi.GoVersion != "" {
		parts = append(parts, bi.GoVersion)
	}
	return strings.Join(parts, " ")
}
