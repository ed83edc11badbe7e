// Package kubetest runs a real kube-apiserver and etcd on 127.0.0.1 for
// tests: no fake clientset, so what the agent is tested against is what a
// cluster does (watch semantics, RBAC, the status subresource).
//
// The binaries are built from Go modules by hack/k8sbins/build.sh into a
// cache keyed by version (BinDir). Start fails the test, naming the command,
// when they are missing: a test that cannot reach its dependency must not
// pass quietly.
//
//	server.go   Start, Options, Server: etcd and kube-apiserver on loopback,
//	            with tokens per user and a service-account key; Launch
//	            starts them for a program (the demo) rather than a test
//	bins.go     where hack/k8sbins/build.sh puts the binaries, and the error
//	            that says how to build them
//	proc.go     the child processes, free ports, log tails, polling
//	crd.go      the ClusterNetworkPolicy CRD from the module cache, installed
//	objects.go  namespaces and running pods, as a kubelet would report them
//	apply.go    Apply: server-side apply of manifests
//	audit.go    AuditEvents: the API server's audit log (Options.Audit)
//	etcd.go     PutStored: an object written straight into etcd, as an
//	            older API server stored it
package kubetest
