// Package kubetest runs a real kube-apiserver and etcd on 127.0.0.1 for
// tests: no fake clientset, so what the agent is tested against is what a
// cluster does (watch semantics, RBAC, the status subresource).
//
// The binaries are built from Go modules by hack/k8sbins/build.sh into a
// cache keyed by version (BinDir). Start fails the test, naming the command,
// when they are missing: a test that cannot reach its dependency must not
// pass quietly.
package kubetest
