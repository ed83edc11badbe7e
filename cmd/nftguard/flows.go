package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/nftguard/nftguard/explain"
	"github.com/nftguard/nftguard/flowlog"
	"github.com/nftguard/nftguard/manifest"
	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/tablelayout"
)

// runFlows prints denied packets as the kernel logs them: it reads the
// NFLOG group of the table's log statements (tablelayout.LogDenied) directly
// over netlink. Reading the group rather than the agent's ring is the
// simpler contract for a human at a node: it works with no agent (a lab,
// `nftguard apply`), needs nothing but the namespace, and the kernel lets
// only one socket read a group, so when the agent runs this command says
// so instead of silently stealing its records.
func runFlows(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("flows", flag.ContinueOnError)
	var files stringList
	var netns, kubeconfig, namespace, pod, output string
	fs.StringVar(&netns, "netns", "", "read inside the network namespace at this path, the one the table is in (default: the current one)")
	var group uint
	var count int
	var duration time.Duration
	fs.Var(&files, "f", "manifest file or directory to name pods and policies from (YAML or JSON, repeatable; - for stdin)")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "name pods and policies from a live cluster (this kubeconfig), read once at start")
	fs.UintVar(&group, "group", tablelayout.DefaultLogGroup, "the NFLOG group the table logs denied packets to")
	fs.StringVar(&namespace, "namespace", "", "only flows from or to pods of this namespace")
	fs.StringVar(&pod, "pod", "", "only flows from or to this pod (NAMESPACE/NAME)")
	fs.StringVar(&output, "o", "text", "output: text (one line per flow) or json (one object per line)")
	fs.IntVar(&count, "count", 0, "exit after this many flows (0: until interrupted)")
	fs.DurationVar(&duration, "for", 0, "exit after this long (0: until interrupted)")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	switch {
	case output != "text" && output != "json":
		return usagef("-o must be text or json")
	case len(files) > 0 && kubeconfig != "":
		return usagef("-f and --kubeconfig exclude each other")
	case group > 0xffff:
		return usagef("--group must be at most 65535")
	case pod != "" && !strings.Contains(pod, "/"):
		return usagef("--pod must be NAMESPACE/NAME")
	case count < 0 || duration < 0:
		return usagef("--count and --for must not be negative")
	}

	var res flowlog.Resolver
	if len(files) > 0 || kubeconfig != "" {
		objs, err := flowObjects(ctx, stdin, files, kubeconfig, stderr)
		if err != nil {
			return err
		}
		res = objs
	}
	r, err := flowlog.Open(flowlog.Config{Group: uint16(group), NetNS: netns})
	if errors.Is(err, flowlog.ErrGroupBusy) {
		return fmt.Errorf("%w: group %d; when `nftguard run --log-denied` runs on this node, its log carries these records", err, group)
	}
	if err != nil {
		return err
	}
	defer r.Close()

	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	enc := json.NewEncoder(stdout)
	shown := 0
	var werr error
	err = r.Run(ctx, func(rec flowlog.Record) {
		flowlog.Resolve(&rec, res)
		if !flowMatches(&rec, namespace, pod) || werr != nil {
			return
		}
		if output == "json" {
			werr = enc.Encode(&rec)
		} else {
			_, werr = fmt.Fprintln(stdout, flowLine(&rec))
		}
		shown++
		if werr != nil || (count > 0 && shown >= count) {
			stop()
		}
	})
	if werr != nil {
		return fmt.Errorf("write: %w", werr)
	}
	return err
}

// flowObjects reads the objects pods and policies are named from.
func flowObjects(ctx context.Context, stdin io.Reader, files []string, kubeconfig string, stderr io.Writer) (*flowlog.Objects, error) {
	if len(files) > 0 {
		objs, _, err := readManifests(stdin, files, stderr)
		if err != nil {
			return nil, err
		}
		return flowResolver(objs), nil
	}
	objs, err := liveObjects(ctx, kubeconfig)
	if err != nil {
		return nil, err
	}
	return flowResolver(objs), nil
}

// flowResolver names pods and NetworkPolicies from objs and, when there
// are ClusterNetworkPolicies, the rule of one that denied a flow (judged
// by explain, see flowlog.ClusterDeny).
func flowResolver(objs *manifest.Objects) *flowlog.Objects {
	o := flowlog.NewObjects(objs.Pods, objs.NetworkPolicies)
	if len(objs.ClusterNetworkPolicies) > 0 {
		cl, _ := explain.New(explain.Input{Namespaces: objs.Namespaces, Nodes: objs.Nodes, Pods: podset.FromAPIList(objs.Pods),
			NetworkPolicies: objs.NetworkPolicies, ClusterNetworkPolicies: objs.ClusterNetworkPolicies})
		o.WithCluster(cl)
	}
	return o
}

// flowMatches applies --namespace and --pod to either end of the flow.
func flowMatches(r *flowlog.Record, namespace, pod string) bool {
	if pod != "" && r.SrcPod != pod && r.DstPod != pod {
		return false
	}
	if namespace != "" && !strings.HasPrefix(r.SrcPod, namespace+"/") && !strings.HasPrefix(r.DstPod, namespace+"/") {
		return false
	}
	return true
}

// flowLine is one flow for a human:
//
//	2026-12-01T03:04:05.678Z denied ingress udp from y/a (10.100.0.4:60732) to x/b (10.100.0.3:81): pod x/b isolated for ingress by policy in-b; no rule allowed
func flowLine(r *flowlog.Record) string {
	what := r.ProtocolName()
	if r.HasICMP {
		what += " type " + strconv.Itoa(int(r.ICMPType)) + " code " + strconv.Itoa(int(r.ICMPCode))
	}
	dir := string(r.Direction)
	if dir == "" {
		dir = "(not nftguard's)"
	}
	return fmt.Sprintf("%s denied %s %s from %s to %s: %s", r.Time.UTC().Format("2006-01-02T15:04:05.000Z"), dir, what,
		endpoint(r.SrcPod, r.Src, r.SrcPort, r.HasICMP), endpoint(r.DstPod, r.Dst, r.DstPort, r.HasICMP), r.Decision)
}

func endpoint(pod string, a netip.Addr, port uint16, icmp bool) string {
	addr := a.String()
	if !icmp && port != 0 {
		addr = netip.AddrPortFrom(a, port).String()
	}
	if pod == "" {
		return addr
	}
	return pod + " (" + addr + ")"
}
