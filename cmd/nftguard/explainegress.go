package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/nftguard/nftguard/egress"
	"github.com/nftguard/nftguard/manifest"
	"github.com/nftguard/nftguard/podset"
)

// runExplainEgress says what source address a pod's traffic to one
// destination leaves with, and why: it compiles egress for the pod's node
// (egress.SourceOf), from manifests or a live cluster.
func runExplainEgress(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("explain-egress", flag.ContinueOnError)
	var files, clusterCIDRs, serviceCIDRs, local stringList
	var from, to, port, sport, kubeconfig string
	var live bool
	fs.Var(&files, "f", "manifest file or directory (YAML or JSON, repeatable; - for stdin)")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "read a live cluster (this kubeconfig) instead of manifests")
	fs.BoolVar(&live, "in-cluster", false, "read the live cluster of the in-cluster service account")
	fs.StringVar(&from, "from", "", "source pod: NAMESPACE/POD")
	fs.StringVar(&to, "to", "", "destination IP address")
	fs.StringVar(&port, "port", "", "destination port as PROTO/PORT, e.g. tcp/443 (needed for Services with port restrictions)")
	fs.StringVar(&sport, "source-port", "", "source port as a number (for Services with source port restrictions)")
	fs.Var(&clusterCIDRs, "cluster-cidr", "pod CIDR of the cluster, as given to run (repeatable)")
	fs.Var(&serviceCIDRs, "service-cidr", "Service CIDR of the cluster, as given to run (repeatable)")
	fs.Var(&local, "node-address", "an address the pod's node holds (repeatable): without any, every load-balancer address is assumed to be on the pod's node")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	switch {
	case len(files) == 0 && kubeconfig == "" && !live:
		return usagef("-f PATH, --kubeconfig FILE or --in-cluster is required")
	case len(files) > 0 && (kubeconfig != "" || live):
		return usagef("-f and --kubeconfig/--in-cluster exclude each other")
	case from == "" || to == "":
		return usagef("--from and --to are required")
	}
	dst, err := netip.ParseAddr(to)
	if err != nil {
		return usagef("--to %q: not an IP address", to)
	}
	var proto string
	var dport, srcPort uint16
	if port != "" {
		p, n, ok := strings.Cut(port, "/")
		var num int
		if _, err := fmt.Sscanf(n, "%d", &num); !ok || err != nil || num < 1 || num > 65535 {
			return usagef("--port %q: want PROTO/PORT, e.g. tcp/443", port)
		}
		proto, dport = strings.ToLower(p), uint16(num)
	}
	if sport != "" {
		var num int
		if _, err := fmt.Sscanf(sport, "%d", &num); err != nil || num < 1 || num > 65535 {
			return usagef("--source-port %q: want a port number", sport)
		}
		srcPort = uint16(num)
	}
	in := egress.Input{}
	for _, l := range []struct {
		vals stringList
		into *[]netip.Prefix
		flag string
	}{{clusterCIDRs, &in.ClusterCIDRs, "--cluster-cidr"}, {serviceCIDRs, &in.ServiceCIDRs, "--service-cidr"}} {
		for _, v := range l.vals {
			p, err := netip.ParsePrefix(v)
			if err != nil {
				return usagef("%s %q: %v", l.flag, v, err)
			}
			*l.into = append(*l.into, p.Masked())
		}
	}
	if len(local) > 0 {
		in.Local = &egress.LocalAddrs{}
		for _, v := range local {
			a, err := netip.ParseAddr(v)
			if err != nil {
				return usagef("--node-address %q: not an IP address", v)
			}
			in.Local.Prefixes = append(in.Local.Prefixes, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	var objs *manifest.Objects
	if len(files) > 0 {
		if objs, _, err = readManifests(stdin, files, stderr); err != nil {
			return err
		}
	} else if objs, err = liveObjects(ctx, kubeconfig); err != nil {
		return err
	}
	in.Pods = podset.NewSet(podset.FromAPIList(objs.Pods))
	in.Services, in.Nodes = objs.Services, objs.Nodes
	src, err := egress.SourceOf(in, from, dst, proto, dport, srcPort)
	if err != nil {
		return usageError{err}
	}
	flow := from
	if src.From.IsValid() {
		flow += " (" + src.From.String() + ")"
	}
	flow += " -> " + dst.String()
	if port != "" {
		flow += " " + proto + "/" + fmt.Sprint(dport)
	}
	switch src.Verdict {
	case egress.SourceTranslated:
		fmt.Fprintf(stdout, "%s: leaves with %s\n", flow, src.To)
	case egress.SourceHeld, egress.SourcePending:
		fmt.Fprintf(stdout, "%s: dropped (%s)\n", flow, src.Verdict)
	case egress.SourceInternal:
		fmt.Fprintf(stdout, "%s: keeps its own address\n", flow)
	default:
		fmt.Fprintf(stdout, "%s: not translated by nftguard\n", flow)
	}
	fmt.Fprintf(stdout, "  %s\n", src.Why)
	return nil
}
