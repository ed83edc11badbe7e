// Command demo shows nftguard at work in throw-away network namespaces.
//
// `make demo` (go run ./demo) shows the agent, what a cluster runs: a real
// kube-apiserver and etcd on 127.0.0.1 (the binaries `make k8sbins`
// builds), two lab nodes with pods and a host outside the cluster, and one
// `nftguard run` per node. It then walks through a NetworkPolicy created
// through the API reaching the kernel (with the agent's own measure of the
// time it took), a rule deleted by hand and repaired, egress SNAT of a
// LoadBalancer Service annotated kube-vip.io/egress seen from the outside
// host, the Service's address moving to the other node (the pod left behind
// is held, never sent out with its node's address), and `nftguard explain`
// and `nftguard explain-egress` answering for those flows. It checks each
// fact it shows and exits non-zero when one does not hold.
//
// `make demo-apply` (go run ./demo apply) is the walkthrough without an
// API server: it builds a node with pods in namespaces frontend, backend
// and db, prints who can reach whom, applies the policies in examples/ with
// `nftguard apply`, prints the matrix again and the table nftguard
// programmed, then adds the ClusterNetworkPolicies of examples/cluster/
// and prints the matrix once more. It exits non-zero when an enforced
// matrix is not the one examples/README.md describes.
//
// Both remove everything they started (processes, network namespaces,
// files) when they end, also on Ctrl-C or SIGTERM; the agent demo checks
// at the end that the host's ruleset and network sysctls are as they were.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/nftguard/nftguard/internal/netlab"
)

// labTag and tempPrefix name what the demo creates: its network namespaces
// (`ip netns list` shows ngl-PID.START-dmo...) and its temporary files.
const (
	labTag     = "dmo"
	tempPrefix = "dmo-nftguard-"
)

func main() {
	var o agentOptions
	flag.StringVar(&o.bin, "nftguard", "bin/nftguard", "the nftguard binary to demonstrate")
	examples := flag.String("examples", "examples", "folder with the example policies (apply)")
	flag.StringVar(&o.deploy, "deploy", "deploy", "folder with the DaemonSet's manifests: the agents get the permissions of its rbac.yaml")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: demo [flags] [agent|apply]\n\n"+
			"agent (the default, make demo): nftguard run on two nodes against a real API server\n"+
			"apply (make demo-apply): nftguard apply of examples/ on one node\n\nflags:\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	// The demo stops its agents and the API server and removes its files
	// on a signal, then its labs: netlab's own handler would end the
	// process first.
	netlab.CallerHandlesSignals()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		// A second Ctrl-C ends the process at once; its child processes
		// die with it, and the next run removes its namespaces.
		stop()
	}()
	var err error
	switch flag.Arg(0) {
	case "", "agent":
		err = runAgent(ctx, os.Stdout, o)
	case "apply":
		err = runApply(ctx, os.Stdout, o.bin, *examples)
	default:
		flag.Usage()
		os.Exit(2)
	}
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "demo: interrupted")
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
