// Command nftguard enforces Kubernetes network policy with nftables over
// netlink, in one table it owns and nothing else. See README.md and
// DESIGN.md for the subcommands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// Exit codes of the CLI contract.
const (
	exitOK      = 0
	exitFailure = 1 // a runtime failure, or objects skipped as invalid
	exitUsage   = 2 // bad usage or unreadable input
)

// usageError marks errors that are the caller's fault (exit code 2).
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// partialError means the command did its work but left invalid objects out
// (exit code 1, after the problems have been printed).
type partialError struct{ skipped int }

func (e partialError) Error() string { return fmt.Sprintf("%d invalid object(s) skipped", e.skipped) }

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"apply", "make the table match Kubernetes manifests (-f PATH), then exit", runApply},
		{"render", "print the table that apply would program, touching nothing", runRender},
		{"cleanup", "remove nftguard's table in one transaction", runCleanup},
		{"run", "the node agent: keep the table equal to the cluster's policies", runRun},
		{"explain", "say whether NetworkPolicy allows one flow, and which rule decided", runExplain},
		{"doctor", "read-only host check: nftables features, foreign tables and rules", runDoctor},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdin, stdout, stderr)
		var ue usageError
		var pe partialError
		switch {
		case err == nil:
			return exitOK
		case errors.Is(err, flag.ErrHelp):
			return exitOK
		case errors.As(err, &ue):
			fmt.Fprintf(stderr, "nftguard %s: %v\n", c.name, err)
			return exitUsage
		case errors.As(err, &pe):
			fmt.Fprintf(stderr, "nftguard %s: %v\n", c.name, err)
			return exitFailure
		default:
			fmt.Fprintf(stderr, "nftguard %s: %v\n", c.name, err)
			return exitFailure
		}
	}
	fmt.Fprintf(stderr, "nftguard: unknown command %q\n", args[0])
	printUsage(stderr)
	return exitUsage
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: nftguard COMMAND [flags]")
	fmt.Fprintln(w, "\ncommands:")
	cs := commands()
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'nftguard COMMAND -h' for the flags of a command.")
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// common holds the flags shared by the subcommands.
type common struct {
	nodeName     string
	netns        string
	clusterCIDRs prefixList
	serviceCIDRs prefixList
}

func (c *common) register(fs *flag.FlagSet) {
	host, _ := os.Hostname()
	fs.StringVar(&c.nodeName, "node-name", host, "the Kubernetes node whose pods are enforced")
	fs.StringVar(&c.netns, "netns", "", "program the table inside the network namespace at this path (default: the current one)")
}

// registerEgress adds the flags that tell egress SNAT which destinations are
// inside the cluster.
func (c *common) registerEgress(fs *flag.FlagSet) {
	fs.Var(&c.clusterCIDRs, "cluster-cidr", "pod CIDR of the cluster, IPv4 or IPv6 (repeatable); traffic to it is never translated")
	fs.Var(&c.serviceCIDRs, "service-cidr", "Service CIDR of the cluster, IPv4 or IPv6 (repeatable); traffic to it is never translated")
}

// prefixList is a repeatable CIDR flag.
type prefixList []netip.Prefix

func (p *prefixList) String() string {
	var s []string
	for _, x := range *p {
		s = append(s, x.String())
	}
	return strings.Join(s, ",")
}

func (p *prefixList) Set(v string) error {
	for _, item := range strings.Split(v, ",") {
		pr, err := netip.ParsePrefix(strings.TrimSpace(item))
		if err != nil {
			return fmt.Errorf("not a CIDR: %q", item)
		}
		*p = append(*p, pr.Masked())
	}
	return nil
}

// parseFlags parses args, accepting flags in any order after the command,
// and refuses positional arguments.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}
