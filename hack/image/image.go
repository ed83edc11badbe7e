package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's layout, the same as the Dockerfile's final stage (a test
// reads the Dockerfile and compares): one file, the static binary, at
// BinaryPath; it is the entrypoint, "run" the default argument; no USER,
// so root, whose capabilities the DaemonSet drops to NET_ADMIN.
const (
	BinaryPath = "/nftguard"
	DefaultCmd = "run"
)

// OCI annotation keys (image-spec annotations.md) and containerd's name key.
const (
	annSource   = "org.opencontainers.image.source"
	annRevision = "org.opencontainers.image.revision"
	annVersion  = "org.opencontainers.image.version"
	annCreated  = "org.opencontainers.image.created"
	annRefName  = "org.opencontainers.image.ref.name"
	// ctr images import names an image by this annotation of the
	// layout's index.json (the full reference); podman load reads
	// ref.name.
	annContainerdName = "io.containerd.image.name"
)

// Meta is what the annotations say and the fixed time every timestamp in
// the image carries.
type Meta struct {
	// Repository and Version name the image: Repository:Version.
	Repository, Version string
	// Source is the repository URL; Revision the commit.
	Source, Revision string
	// Created is the commit's time (or SOURCE_DATE_EPOCH): every time
	// field, in the config and in the layer's tar headers.
	Created time.Time
}

// Ref is the image's full name.
func (m Meta) Ref() string { return m.Repository + ":" + m.Version }

func (m Meta) annotations() map[string]string {
	return map[string]string{
		annSource:   m.Source,
		annRevision: m.Revision,
		annVersion:  m.Version,
		annCreated:  m.Created.UTC().Format(time.RFC3339),
	}
}

// Binary is one platform's static nftguard.
type Binary struct {
	Arch string // GOARCH
	Data []byte
}

// Index builds the multi-platform image: an OCI image index with one image
// per binary, in the order given. Everything in it is a function of its
// arguments, so the same commit gives the same digest.
func Index(bins []Binary, meta Meta) (v1.ImageIndex, error) {
	if len(bins) == 0 {
		return nil, fmt.Errorf("no binaries")
	}
	var adds []mutate.IndexAddendum
	for _, b := range bins {
		img, err := platformImage(b, meta)
		if err != nil {
			return nil, fmt.Errorf("%s image: %w", b.Arch, err)
		}
		adds = append(adds, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: b.Arch}},
		})
	}
	idx := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	return mutate.Annotations(idx, meta.annotations()).(v1.ImageIndex), nil
}

func platformImage(b Binary, meta Meta) (v1.Image, error) {
	layerTar, err := binaryLayer(b.Data, meta.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	created := v1.Time{Time: meta.Created.UTC()}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: created, CreatedBy: "hack/image: COPY nftguard " + BinaryPath, Comment: "static nftguard (CGO_ENABLED=0)"},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = b.Arch, "linux"
	cf.Created = created
	cf.Config = v1.Config{
		Entrypoint: []string{BinaryPath},
		Cmd:        []string{DefaultCmd},
		Labels:     meta.annotations(),
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	return mutate.Annotations(img, meta.annotations()).(v1.Image), nil
}

// binaryLayer is the layer's tar: the one file, root-owned, 0755, at the
// fixed time.
func binaryLayer(bin []byte, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     BinaryPath[1:],
		Mode:     0o755,
		Size:     int64(len(bin)),
		ModTime:  created.UTC(),
		Format:   tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteLayout writes idx as an OCI image layout in dir (which must not
// exist yet): index.json lists the image index under the image's full name,
// so `podman load`, `ctr images import` (of WriteArchive's tar) and
// `skopeo copy oci:DIR` find it by name.
func WriteLayout(dir string, idx v1.ImageIndex, meta Meta) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("%s exists: the layout is written fresh", dir)
	}
	top := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{
		Add: idx,
		Descriptor: v1.Descriptor{Annotations: map[string]string{
			annRefName:        meta.Ref(),
			annContainerdName: meta.Ref(),
		}},
	})
	if _, err := layout.Write(dir, top); err != nil {
		return fmt.Errorf("write OCI layout %s: %w", dir, err)
	}
	return nil
}

// WriteArchive writes the layout in dir as one tar (an "oci-archive"),
// byte for byte the same for the same layout: entries sorted by name,
// root-owned, fixed modes, every time the given one.
func WriteArchive(w io.Writer, dir string, mtime time.Time) error {
	var names []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != dir {
			names = append(names, path)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read layout %s: %w", dir, err)
	}
	sort.Strings(names)
	tw := tar.NewWriter(w)
	for _, path := range names {
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime.UTC(), Format: tar.FormatPAX}
		switch {
		case fi.IsDir():
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
		case fi.Mode().IsRegular():
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, fi.Size()
		default:
			return fmt.Errorf("%s: not a file or directory", path)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if _, err := tw.Write(data); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}
