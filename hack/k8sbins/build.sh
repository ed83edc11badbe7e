#!/usr/bin/env bash
# Builds kube-apiserver v1.37.2 and etcd v3.7.0 from Go modules (no release
# downloads) into the version-keyed cache that internal/kubetest reads.
# Skips the build when both binaries are already there. Cold: ~15 min on
# 2 cores; warm Go build cache: ~20 s. Two runs at once (make test and
# make demo in two terminals) build once: the second waits for the first.
set -euo pipefail
cd "$(dirname "$0")"
K8S_VERSION=v1.37.2
dir="${NFTGUARD_K8S_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/nftguard-test/k8s-$K8S_VERSION}"
have() { [ -x "$dir/kube-apiserver" ] && [ -x "$dir/etcd" ]; }
if have; then
	exit 0
fi
mkdir -p "$(dirname "$dir")"
exec 9>"$dir.lock"
if ! flock -n 9; then
	echo "another build of kube-apiserver and etcd into $dir is running: waiting for it" >&2
	flock 9
fi
if have; then
	exit 0
fi
GO="${GO:-go}"
tmp="$dir.tmp.$$"
hb=
trap 'rm -rf "$tmp"; [ -z "$hb" ] || kill "$hb" 2>/dev/null' EXIT
mkdir -p "$tmp"
echo "building kube-apiserver $K8S_VERSION and etcd from source into $dir:" >&2
echo "the first time only, about 15 minutes on 2 cores (later runs use this cache)" >&2
start=$SECONDS
# A line a minute, so that a long quiet build does not look stuck.
( while sleep 60 >/dev/null 2>&1; do echo "  still building kube-apiserver and etcd: $(( (SECONDS - start) / 60 )) min so far" >&2; done ) &
hb=$!
ldver="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
# Do not add -trimpath: it changes every cache key and costs a full rebuild.
"$GO" build -ldflags "-s -w $ldver" -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
"$GO" build -ldflags "-s -w" -o "$tmp/etcd" ./cmd/etcd
# Publish both binaries at once so a killed build never leaves half a cache.
rm -rf "$dir"
mv "$tmp" "$dir"
echo "kube-apiserver and etcd built in $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s" >&2
