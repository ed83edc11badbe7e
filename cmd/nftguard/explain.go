package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/nftguard/nftguard/explain"
	"github.com/nftguard/nftguard/manifest"
)

// runExplain judges one flow against the manifests with the explain
// package, an independent reading of NetworkPolicy semantics (it does not
// look at nftables rules). A denied flow is a successful answer: exit 0.
func runExplain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	var files stringList
	var from, to, port, nodeName, kubeconfig string
	var live bool
	var family int
	fs.Var(&files, "f", "manifest file or directory (YAML or JSON, repeatable; - for stdin)")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "judge against a live cluster (this kubeconfig) instead of manifests")
	fs.BoolVar(&live, "in-cluster", false, "judge against the live cluster of the in-cluster service account")
	fs.StringVar(&from, "from", "", "source: NAMESPACE/POD or an IP address")
	fs.StringVar(&to, "to", "", "destination: NAMESPACE/POD or an IP address")
	fs.StringVar(&port, "port", "", "destination port as PROTO/PORT, e.g. tcp/80")
	fs.StringVar(&nodeName, "node-name", "", "judge as this node's agent enforces (only its pods are isolated); default: every node enforces")
	fs.IntVar(&family, "family", 0, "4 or 6: the pods' address family for a pod-to-pod flow (default 4 when both pods have one)")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	switch {
	case len(files) == 0 && kubeconfig == "" && !live:
		return usagef("-f PATH, --kubeconfig FILE or --in-cluster is required")
	case len(files) > 0 && (kubeconfig != "" || live):
		return usagef("-f and --kubeconfig/--in-cluster exclude each other")
	case from == "" || to == "" || port == "":
		return usagef("--from, --to and --port are required")
	case family != 0 && family != 4 && family != 6:
		return usagef("--family must be 4 or 6")
	}
	proto, num, err := explain.ParsePort(port)
	if err != nil {
		return usageError{err}
	}
	var objs *manifest.Objects
	if len(files) > 0 {
		if objs, _, err = readManifests(stdin, files, stderr); err != nil {
			return err
		}
	} else if objs, err = liveObjects(ctx, kubeconfig); err != nil {
		return err
	}
	cl, probs := explain.New(explain.Input{
		NodeName:        nodeName,
		Namespaces:      objs.Namespaces,
		Nodes:           objs.Nodes,
		Pods:            objs.Pods,
		NetworkPolicies: objs.NetworkPolicies,
	})
	for _, p := range probs {
		fmt.Fprintf(stderr, "skipped: %v\n", p)
	}
	res, err := cl.Explain(explain.Flow{From: from, To: to, Protocol: proto, Port: num, Family: family})
	if errors.Is(err, explain.ErrBadInput) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, res)
	return nil
}
