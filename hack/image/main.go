// Command image builds nftguard's container image offline: the static
// binary (CGO_ENABLED=0, cross-compiled per GOARCH) as the one file of an
// empty image, written as an OCI image layout and as a tar of it (an
// oci-archive) that `podman load -i` and `ctr -n k8s.io images import`
// read without a registry. `make image` runs it.
//
// Reproducible: the same commit gives the same digest. The binary is built
// with -trimpath and -buildvcs=false, its version and revision stamped with
// -ldflags -X (what `nftguard version` prints); every timestamp is the
// commit's time (or SOURCE_DATE_EPOCH); the layer's and the archive's tar
// entries are sorted, root-owned, with fixed modes.
//
// It is a module of its own so that go-containerregistry, a build tool's
// dependency, stays out of nftguard's go.mod.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	src := fs.String("src", "../..", "nftguard's source tree (the main module's directory)")
	out := fs.String("out", "", "output directory (must not exist): DIR/oci is the OCI layout, DIR/nftguard-VERSION.oci.tar the archive of it")
	arches := fs.String("arch", "amd64,arm64", "GOARCHes to build, comma-separated (linux)")
	repo := fs.String("repository", "ghcr.io/nftguard/nftguard", "the image's name without the tag (the tag is the version)")
	source := fs.String("source", "https://github.com/nftguard/nftguard", "org.opencontainers.image.source")
	ver := fs.String("version", "", "the version (default: the VERSION file of -src)")
	rev := fs.String("revision", "", "the commit (default: git rev-parse HEAD in -src)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		return errors.New("usage: image -out DIR [-src DIR] [-arch amd64,arm64] [-version V] [-revision R]")
	}
	meta := Meta{Repository: *repo, Source: *source, Version: *ver, Revision: *rev}
	if meta.Version == "" {
		b, err := os.ReadFile(filepath.Join(*src, "VERSION"))
		if err != nil {
			return fmt.Errorf("version: %w", err)
		}
		meta.Version = strings.TrimSpace(string(b))
	}
	modified := false
	if meta.Revision == "" {
		r, err := git(*src, "rev-parse", "HEAD")
		if err != nil {
			return fmt.Errorf("revision (or give -revision): %w", err)
		}
		meta.Revision = r
		// Uncommitted changes to tracked files make a binary the
		// revision does not describe: `nftguard version` says so.
		st, err := git(*src, "status", "--porcelain", "--untracked-files=no")
		if err != nil {
			return err
		}
		modified = st != ""
	}
	created, err := sourceDate(*src)
	if err != nil {
		return err
	}
	meta.Created = created

	tmp, err := os.MkdirTemp("", "img-build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var bins []Binary
	for _, arch := range strings.Split(*arches, ",") {
		b, err := buildBinary(*src, tmp, arch, meta, modified)
		if err != nil {
			return err
		}
		bins = append(bins, Binary{Arch: arch, Data: b})
	}
	idx, err := Index(bins, meta)
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	layoutDir := filepath.Join(*out, "oci")
	if err := WriteLayout(layoutDir, idx, meta); err != nil {
		return err
	}
	archive := filepath.Join(*out, "nftguard-"+meta.Version+".oci.tar")
	f, err := os.Create(archive)
	if err != nil {
		return err
	}
	if err := WriteArchive(f, layoutDir, meta.Created); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", archive, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Printf("%s@%s\nlayout  %s\narchive %s\n", meta.Ref(), digest, layoutDir, archive)
	return nil
}

// buildBinary cross-compiles cmd/nftguard for linux/arch, reproducibly.
func buildBinary(src, tmp, arch string, meta Meta, modified bool) ([]byte, error) {
	out := filepath.Join(tmp, "nftguard-"+arch)
	ldflags := fmt.Sprintf("-s -w -X main.version=%s -X main.revision=%s", meta.Version, meta.Revision)
	if modified {
		ldflags += " -X main.modified=true"
	}
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, "./cmd/nftguard")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build (GOARCH=%s): %w\n%s", arch, err, msg)
	}
	return os.ReadFile(out)
}

// sourceDate is SOURCE_DATE_EPOCH if set, else the commit's time.
func sourceDate(src string) (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		var err error
		if s, err = git(src, "log", "-1", "--format=%ct"); err != nil {
			return time.Time{}, fmt.Errorf("commit time (or set SOURCE_DATE_EPOCH): %w", err)
		}
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("source date %q: %w", s, err)
	}
	return time.Unix(sec, 0).UTC(), nil
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}
