// Package k8sbins pins kube-apiserver and etcd as Go modules so the agent's
// tests can build a real API server through the Go module proxy alone.
//
// It is a separate module so the project's ./... never compiles Kubernetes.
// build.sh builds both binaries into ~/.cache/nftguard-test/k8s-v1.37.2/.
package k8sbins

import (
	// Keep the module requirements for the two commands that build.sh builds.
	_ "go.etcd.io/etcd/server/v3/etcdmain"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
)
