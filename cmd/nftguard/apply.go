package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/conntrack"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/manifest"
	"github.com/nftguard/nftguard/npset"
	"github.com/nftguard/nftguard/podguard"
	"github.com/nftguard/nftguard/podif"
	"github.com/nftguard/nftguard/podset"
	"github.com/nftguard/nftguard/problem"
)

// input is what apply, render and doctor read: the manifests and what to
// do with an input that has no objects.
type input struct {
	files      stringList
	allowEmpty bool
}

// load reads the manifests and compiles the desired table, printing every
// problem to stderr. It returns the number of skipped objects.
func load(stdin io.Reader, in input, c common, ifs podInterfaces, stderr io.Writer) (*engine.Desired, int, error) {
	res, skipped, err := build(stdin, in, c, ifs, stderr, nil)
	return res.Desired, skipped, err
}

// phases are where a one-shot run spends its time before the kernel, for
// apply's summary: at scale reading the manifests is the larger part.
type phases struct {
	objects     int
	read, build time.Duration
}

// podInterfaces reads the pod-facing interfaces of the namespace the
// table is for (package podif), which bind each local pod to its guard
// chain; nil for a command that touches no kernel (render), whose table
// then has no guard chains.
type podInterfaces func() ([]podguard.Interface, error)

// kernelInterfaces reads the interfaces of --netns, or of the current
// namespace.
func kernelInterfaces(c common) podInterfaces {
	return func() ([]podguard.Interface, error) { return podif.Read(c.netns) }
}

// build is load with the whole compose result, for apply, which also needs
// the egress bindings to clear stale conntrack entries.
//
// Input that cannot be read completely, input without objects (unless
// --allow-empty), and a node name that matches nothing in the input are
// usage errors (exit 2) and nothing is built: each of them would otherwise
// program a table that enforces less than intended, or nothing at all.
// Objects that were read but are invalid are skipped and counted; the
// rest is built.
//
// When t is not nil, it receives the time spent reading and building.
func build(stdin io.Reader, in input, c common, ifs podInterfaces, stderr io.Writer, t *phases) (compose.Result, int, error) {
	if len(in.files) == 0 {
		return compose.Result{}, 0, usagef("-f PATH is required (a manifest file, a directory, or - for stdin)")
	}
	logDenied, err := c.logDeniedConfig()
	if err != nil {
		return compose.Result{}, 0, err
	}
	start := time.Now()
	objs, problems, err := readManifests(stdin, in.files, stderr)
	if err != nil {
		return compose.Result{}, 0, err
	}
	read := time.Since(start)
	if objs.Len() == 0 {
		if !in.allowEmpty {
			what := "no objects"
			if len(problems) > 0 {
				what = "no valid objects"
			}
			return compose.Result{}, 0, usagef("%s in %s (nftguard reads Namespaces, Nodes, Pods, NetworkPolicies, ClusterNetworkPolicies, Services and EndpointSlices); --allow-empty to program an empty table", what, paths(in.files))
		}
	} else if err := checkNode(c, objs); err != nil {
		return compose.Result{}, 0, err
	}
	var pifs []podguard.Interface
	if ifs != nil {
		// After the input is known to be usable, before anything is
		// built: a node whose interfaces cannot be read is not
		// programmed at all (exit 1, the table as it was).
		if pifs, err = ifs(); err != nil {
			return compose.Result{}, 0, err
		}
	}
	res := compose.Build(compose.Input{
		PodInterfaces:      pifs,
		PodInterfacesKnown: ifs != nil,
		LogDenied:          logDenied,
		NodeName:           c.nodeName,
		Namespaces:         objs.Namespaces,
		Nodes:              objs.Nodes,
		Pods:               podset.NewSet(podset.FromAPIList(objs.Pods)),
		NetworkPolicies:    npset.New(objs.NetworkPolicies),
		// Both served versions, already converted to v1beta1.
		ClusterNetworkPolicies: objs.ClusterNetworkPolicies,
		Services:               objs.Services,
		ClusterCIDRs:           c.clusterCIDRs,
		ServiceCIDRs:           c.serviceCIDRs,
	})
	if t != nil {
		t.objects, t.read, t.build = objs.Len(), read, time.Since(start)-read
	}
	// The compilers do not know files; say where each object came from.
	for i := range res.Problems {
		if res.Problems[i].Source == "" {
			res.Problems[i].Source = objs.Source(res.Problems[i].Object)
		}
		fmt.Fprintln(stderr, skippedLine(res.Problems[i]))
	}
	for i := range res.Warnings {
		if res.Warnings[i].Source == "" {
			res.Warnings[i].Source = objs.Source(res.Warnings[i].Object)
		}
		fmt.Fprintf(stderr, "warning: %v\n", res.Warnings[i])
	}
	// Count objects, not problems: one policy may have several bad fields.
	all := append(append([]problem.Problem{}, problems...), res.Problems...)
	return res, len(problem.Objects(all)), nil
}

// skippedLine reports an object that is not enforced as written. A
// NetworkPolicy is enforced in its fail-closed form (its pods stay
// isolated, none of its rules is installed), and the line says so: the
// object is skipped, its pods are not opened.
func skippedLine(p problem.Problem) string {
	if manifest.StaysIsolated(p) {
		return fmt.Sprintf("skipped: %v (the pods it selects stay isolated: enforced with no rules)", p)
	}
	return fmt.Sprintf("skipped: %v", p)
}

// readManifests loads the manifests and prints what went wrong: every
// unreadable document (then it fails, exit 2), every skipped object and
// every warning.
func readManifests(stdin io.Reader, files []string, stderr io.Writer) (*manifest.Objects, []problem.Problem, error) {
	objs, problems, err := manifest.Load(stdin, files...)
	var ie *manifest.InputError
	if errors.As(err, &ie) {
		for _, p := range ie.Problems {
			fmt.Fprintf(stderr, "error: %v\n", p)
		}
		return nil, nil, usagef("%d problem(s) reading %s; nothing changed", len(ie.Problems), paths(files))
	}
	if err != nil {
		return nil, nil, usageError{err}
	}
	for _, p := range problems {
		fmt.Fprintln(stderr, skippedLine(p))
	}
	for _, w := range objs.Warnings {
		fmt.Fprintf(stderr, "warning: %v\n", w)
	}
	return objs, problems, nil
}

// checkNode refuses a node name that matches nothing in the input: the
// table would isolate no pod, silently. A pod scheduled to the node is a
// match; so is a Node object of that name, but only when --node-name was
// given (the host name assumed by default is often not the node's name).
func checkNode(c common, objs *manifest.Objects) error {
	mentioned := map[string]bool{}
	for _, p := range objs.Pods {
		if p.Spec.NodeName == c.nodeName {
			return nil
		}
		if p.Spec.NodeName != "" {
			mentioned[p.Spec.NodeName] = true
		}
	}
	for _, n := range objs.Nodes {
		if n.Name == c.nodeName && c.nodeNameSet {
			return nil
		}
		mentioned[n.Name] = true
	}
	names := make([]string, 0, len(mentioned))
	for n := range mentioned {
		names = append(names, n)
	}
	sort.Strings(names)
	seen := "the input mentions no node"
	if len(names) > 0 {
		seen = "the input mentions " + strings.Join(names, ", ")
	}
	if !c.nodeNameSet {
		return usagef("node %q (the host name; set --node-name) has no pods in the input; %s", c.nodeName, seen)
	}
	return usagef("node %q (--node-name) has no pods and no Node object in the input; %s", c.nodeName, seen)
}

func paths(files []string) string {
	var out []string
	for _, f := range files {
		if f == "-" {
			f = "standard input"
		}
		out = append(out, f)
	}
	return strings.Join(out, ", ")
}

// manifestFlags parses the flags apply and render share: the common ones,
// the egress CIDRs, -f and --allow-empty.
func manifestFlags(name string, args []string, stdout io.Writer) (common, input, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var c common
	var in input
	c.register(fs)
	c.registerEgress(fs)
	c.registerLogDenied(fs)
	fs.Var(&in.files, "f", "manifest file or directory (YAML or JSON, repeatable; - for stdin)")
	fs.BoolVar(&in.allowEmpty, "allow-empty", false, "accept input without objects (an empty table) instead of refusing it")
	err := parseFlags(fs, args, stdout)
	c.nodeNameSet = explicit(fs, "node-name")
	return c, in, err
}

func runApply(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	c, in, err := manifestFlags("apply", args, stdout)
	if err != nil {
		return err
	}
	var t phases
	res, skipped, err := build(stdin, in, c, kernelInterfaces(c), stderr, &t)
	if err != nil {
		return err
	}
	eng, err := openEngine(c)
	if err != nil {
		return err
	}
	defer eng.Close()
	start := time.Now()
	stats, err := eng.Sync(ctx, res.Desired)
	if err != nil {
		return err
	}
	mode := "incremental"
	if stats.Full {
		mode = "full"
	}
	fmt.Fprintf(stdout, "table %s synced in %v: %d operations in %d messages (%d bytes, %s)\n",
		compose.Table(), time.Since(start).Round(time.Microsecond), stats.Operations, stats.Messages, stats.Bytes, mode)
	fmt.Fprintf(stdout, "%d objects read in %v, table built in %v\n", t.objects, t.read.Round(time.Microsecond), t.build.Round(time.Microsecond))
	// Which local pods the guard chains bind by their interface, and
	// which are attributed by address only (package podguard).
	fmt.Fprintf(stdout, "pods: %d guarded on their interface, %d unattributed\n", len(res.Guarded), len(res.Unattributed))
	if n := len(res.Unattributed); n > 0 {
		// One line, however many pods: a node's manifests of thousands
		// of pods without veths would otherwise bury every other message.
		names := res.Unattributed[:min(n, 3)]
		more := ""
		if n > len(names) {
			more = fmt.Sprintf(" and %d more", n-len(names))
		}
		fmt.Fprintf(stderr, "warning: %d pod(s) have no interface of their own in the node's network namespace (%s%s): their packets are attributed by address only\n",
			n, strings.Join(names, ", "), more)
	}
	// The kernel keeps a connection's NAT binding for its lifetime, so the
	// new table only reaches established flows once their stale entries go.
	cleared, err := conntrack.ClearStale(ctx, c.netns, compose.ConntrackBindings(res.EgressBindings), conntrack.WithCIDRs(c.clusterCIDRs, c.serviceCIDRs))
	if err != nil {
		return fmt.Errorf("table synced, but stale egress translations not cleared: %w", err)
	}
	if cleared.Deleted > 0 {
		fmt.Fprintf(stdout, "conntrack: %d stale egress translations cleared\n", cleared.Deleted)
	}
	if skipped > 0 {
		return partialError{skipped}
	}
	return nil
}

func runRender(_ context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	c, in, err := manifestFlags("render", args, stdout)
	if err != nil {
		return err
	}
	// render touches no kernel: no interfaces, no guard chains.
	desired, skipped, err := load(stdin, in, c, nil, stderr)
	if err != nil {
		return err
	}
	text, err := engine.Render(compose.Table(), desired)
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, text)
	if skipped > 0 {
		return partialError{skipped}
	}
	return nil
}

func runCleanup(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cleanup", flag.ContinueOnError)
	var c common
	c.registerNetNS(fs)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	eng, err := openEngine(c)
	if err != nil {
		return err
	}
	defer eng.Close()
	if err := eng.Delete(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "table %s removed\n", compose.Table())
	return nil
}

func openEngine(c common) (*engine.Engine, error) {
	var opts []engine.Option
	if c.netns != "" {
		opts = append(opts, engine.WithNetNS(c.netns))
	}
	eng, err := engine.New(compose.Table(), opts...)
	if err != nil {
		return nil, fmt.Errorf("open nftables: %w", err)
	}
	return eng, nil
}
