package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/conntrack"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/manifest"
	"github.com/nftguard/nftguard/problem"
)

// load reads the manifests and compiles the desired table, printing every
// problem to stderr. It returns the number of skipped objects.
func load(stdin io.Reader, files []string, c common, stderr io.Writer) (*engine.Desired, int, error) {
	res, skipped, err := build(stdin, files, c, stderr)
	return res.Desired, skipped, err
}

// build is load with the whole compose result, for apply, which also needs
// the egress bindings to clear stale conntrack entries.
func build(stdin io.Reader, files []string, c common, stderr io.Writer) (compose.Result, int, error) {
	if len(files) == 0 {
		return compose.Result{}, 0, usagef("-f PATH is required (a manifest file, a directory, or - for stdin)")
	}
	objs, problems, err := manifest.Load(stdin, files...)
	if err != nil {
		return compose.Result{}, 0, usageError{err}
	}
	for _, p := range problems {
		fmt.Fprintf(stderr, "skipped: %v\n", p)
	}
	res := compose.Build(compose.Input{
		NodeName:        c.nodeName,
		Namespaces:      objs.Namespaces,
		Nodes:           objs.Nodes,
		Pods:            objs.Pods,
		NetworkPolicies: objs.NetworkPolicies,
		Services:        objs.Services,
		ClusterCIDRs:    c.clusterCIDRs,
		ServiceCIDRs:    c.serviceCIDRs,
	})
	for _, p := range res.Problems {
		fmt.Fprintf(stderr, "skipped: %v\n", p)
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(stderr, "warning: %v\n", w)
	}
	// Count objects, not problems: one policy may have several bad fields.
	return res, len(problem.Objects(problems)) + len(problem.Objects(res.Problems)), nil
}

// manifestFlags parses the flags apply and render share: the common ones,
// the egress CIDRs, and -f.
func manifestFlags(name string, args []string, stderr io.Writer) (common, stringList, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var c common
	var files stringList
	c.register(fs)
	c.registerEgress(fs)
	fs.Var(&files, "f", "manifest file or directory (YAML or JSON, repeatable; - for stdin)")
	err := parseFlags(fs, args, stderr)
	return c, files, err
}

func runApply(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	c, files, err := manifestFlags("apply", args, stderr)
	if err != nil {
		return err
	}
	res, skipped, err := build(stdin, files, c, stderr)
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
	// The kernel keeps a connection's NAT binding for its lifetime, so the
	// new table only reaches established flows once their stale entries go.
	cleared, err := conntrack.ClearStale(ctx, c.netns, res.EgressBindings, conntrack.WithCIDRs(c.clusterCIDRs, c.serviceCIDRs))
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
	c, files, err := manifestFlags("render", args, stderr)
	if err != nil {
		return err
	}
	desired, skipped, err := load(stdin, files, c, stderr)
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
	c.register(fs)
	if err := parseFlags(fs, args, stderr); err != nil {
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
