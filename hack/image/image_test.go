package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

var testMeta = Meta{
	Repository: "example.test/nftguard", Version: "v0.1.0",
	Source: "https://example.test/nftguard", Revision: "0123456789abcdef0123456789abcdef01234567",
	Created: time.Unix(1796383582, 0).UTC(),
}

func testIndex(t *testing.T, bins []Binary) v1.ImageIndex {
	t.Helper()
	idx, err := Index(bins, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// The same input gives the same digest, and so the same archive bytes;
// another binary gives another digest.
func TestReproducible(t *testing.T) {
	bins := []Binary{{Arch: "amd64", Data: []byte("amd64 binary")}, {Arch: "arm64", Data: []byte("arm64 binary")}}
	var archives [2][]byte
	var digests [2]v1.Hash
	for i := range archives {
		idx := testIndex(t, bins)
		d, err := idx.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests[i] = d
		dir := filepath.Join(t.TempDir(), "oci")
		if err := WriteLayout(dir, idx, testMeta); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := WriteArchive(&buf, dir, testMeta.Created); err != nil {
			t.Fatal(err)
		}
		archives[i] = buf.Bytes()
	}
	if digests[0] != digests[1] || !bytes.Equal(archives[0], archives[1]) {
		t.Errorf("two builds differ: %v and %v", digests[0], digests[1])
	}
	other, err := testIndex(t, []Binary{{Arch: "amd64", Data: []byte("another binary")}, bins[1]}).Digest()
	if err != nil {
		t.Fatal(err)
	}
	if other == digests[0] {
		t.Error("another binary gave the same digest")
	}
}

// Each platform's image: one layer with one root-owned 0755 file at
// BinaryPath, at the commit's time; the entrypoint, the platform and the
// annotations.
func TestPlatformImages(t *testing.T) {
	idx := testIndex(t, []Binary{{Arch: "amd64", Data: []byte("amd64 binary")}, {Arch: "arm64", Data: []byte("arm64 binary")}})
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != "application/vnd.oci.image.index.v1+json" || len(im.Manifests) != 2 {
		t.Fatalf("index %s with %d manifests", im.MediaType, len(im.Manifests))
	}
	for k, want := range map[string]string{annRevision: testMeta.Revision, annVersion: "v0.1.0", annSource: testMeta.Source} {
		if im.Annotations[k] != want {
			t.Errorf("index annotation %s = %q, want %q", k, im.Annotations[k], want)
		}
	}
	for i, arch := range []string{"amd64", "arm64"} {
		desc := im.Manifests[i]
		if desc.Platform == nil || desc.Platform.Architecture != arch || desc.Platform.OS != "linux" {
			t.Fatalf("manifest %d: platform %+v, want linux/%s", i, desc.Platform, arch)
		}
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != arch || !cf.Created.Time.Equal(testMeta.Created) ||
			len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != BinaryPath || len(cf.Config.Cmd) != 1 || cf.Config.Cmd[0] != DefaultCmd || cf.Config.User != "" {
			t.Errorf("%s config: %+v", arch, cf)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%s: %d layers (%v), want 1", arch, len(layers), err)
		}
		rc, err := layers[0].Compressed()
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(rc)
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(zr)
		hdr, err := tr.Next()
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		if hdr.Name != "nftguard" || hdr.Mode != 0o755 || hdr.Uid != 0 || hdr.Gid != 0 || !hdr.ModTime.Equal(testMeta.Created) || string(data) != arch+" binary" {
			t.Errorf("%s layer entry %+v with %q", arch, hdr, data)
		}
		if _, err := tr.Next(); err != io.EOF {
			t.Errorf("%s layer: more than one entry (%v)", arch, err)
		}
		rc.Close()
	}
}
