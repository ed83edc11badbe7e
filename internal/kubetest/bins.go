package kubetest

import (
	"fmt"
	"os"
	"path/filepath"
)

// Version is the Kubernetes release the binaries are built from.
const Version = "v1.37.2"

// BuildCommand builds the binaries when the cache is cold (~15 min on 2
// cores), relative to the repository root.
const BuildCommand = "hack/k8sbins/build.sh"

// BinDir is where hack/k8sbins/build.sh puts kube-apiserver and etcd:
// $NFTGUARD_K8S_BIN_DIR, else ~/.cache/nftguard-test/k8s-VERSION (it
// follows XDG_CACHE_HOME like the script).
func BinDir() (string, error) {
	if d := os.Getenv("NFTGUARD_K8S_BIN_DIR"); d != "" {
		return d, nil
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("find the binary cache: %w", err)
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "nftguard-test", "k8s-"+Version), nil
}

// binaries returns the paths of kube-apiserver and etcd, or an error that
// says how to build them.
func binaries() (apiserver, etcd string, err error) {
	dir, err := BinDir()
	if err != nil {
		return "", "", err
	}
	apiserver, etcd = filepath.Join(dir, "kube-apiserver"), filepath.Join(dir, "etcd")
	for _, p := range []string{apiserver, etcd} {
		if _, err := os.Stat(p); err != nil {
			return "", "", fmt.Errorf("%s missing: run %s first (builds kube-apiserver %s and etcd from Go modules, ~15 min cold): %w",
				filepath.Base(p), BuildCommand, Version, err)
		}
	}
	return apiserver, etcd, nil
}
