// Command nftguard enforces Kubernetes network policy with nftables over
// netlink, in one table it owns and nothing else. See docs/cli.md for the
// subcommands and docs/design.md for the principles behind them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/netip"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/nftguard/nftguard/tablelayout"
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

// flagError is bad usage found while parsing flags: the command's usage is
// printed after the error.
type flagError struct {
	error
	usage string
}

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
		{"render", "print the table that apply would program, touching nothing: it reads no interfaces, so the pods' guard chains are left out", runRender},
		{"cleanup", "remove nftguard's table in one transaction", runCleanup},
		{"run", "the node agent: keep the table equal to the cluster's policies", runRun},
		{"controller", "publish every pod's compact peer record as PeerSlices (a leader-elected Deployment)", runController},
		{"explain", "say whether NetworkPolicy allows one flow, and which rule decided", runExplain},
		{"explain-egress", "say what source address a pod's traffic to one destination leaves with, and why", runExplainEgress},
		{"flows", "print denied packets as the kernel logs them (NFLOG over netlink)", runFlows},
		{"doctor", "read-only host check: nftables features, foreign tables and rules", runDoctor},
		{"version", "print the version and VCS revision nftguard was built from", runVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printUsage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		printUsage(stdout)
		return exitOK
	case "help":
		// `help CMD` is `CMD -h`: every command parses its flags first.
		switch {
		case len(args) == 1:
			printUsage(stdout)
			return exitOK
		case len(args) > 2:
			fmt.Fprintf(stderr, "nftguard help: want one command, got %q\n", args[1:])
			return exitUsage
		}
		args = []string{args[1], "-h"}
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdin, stdout, stderr)
		var ue usageError
		var fe flagError
		switch {
		case err == nil:
			return exitOK
		case errors.Is(err, flag.ErrHelp):
			return exitOK
		case errors.As(err, &fe):
			fmt.Fprintf(stderr, "nftguard %s: %v\n", c.name, fe.error)
			fmt.Fprint(stderr, fe.usage)
			return exitUsage
		case errors.As(err, &ue):
			fmt.Fprintf(stderr, "nftguard %s: %v\n", c.name, err)
			return exitUsage
		default:
			// Runtime failures and partialError (objects skipped) alike.
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
	fmt.Fprintln(w, "\nRun 'nftguard help COMMAND' (or 'nftguard COMMAND -h') for the flags of a command.")
	fmt.Fprintln(w, "Exit codes: 0 success; 1 runtime failure, or invalid objects skipped (the rest applied;")
	fmt.Fprintln(w, "an invalid NetworkPolicy's pods stay isolated); 2 bad usage or unreadable input (nothing changed).")
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// common holds the flags shared by the subcommands.
type common struct {
	nodeName string
	// nodeNameSet: --node-name was given, rather than the host name assumed.
	nodeNameSet  bool
	netns        string
	clusterCIDRs prefixList
	serviceCIDRs prefixList
	// logDenied and its settings: see registerLogDenied.
	logDenied                   bool
	logGroup, logRate, logBurst uint
}

func (c *common) register(fs *flag.FlagSet) {
	host, _ := os.Hostname()
	fs.StringVar(&c.nodeName, "node-name", host, "the Kubernetes node whose pods are enforced")
	c.registerNetNS(fs)
}

// registerNetNS is the one shared flag of the commands that touch the
// table without compiling anything (cleanup).
func (c *common) registerNetNS(fs *flag.FlagSet) {
	fs.StringVar(&c.netns, "netns", "", "program the table inside the network namespace at this path (default: the current one)")
}

// registerEgress adds the flags that tell egress SNAT which destinations are
// inside the cluster.
func (c *common) registerEgress(fs *flag.FlagSet) {
	fs.Var(&c.clusterCIDRs, "cluster-cidr", "pod CIDR of the cluster, IPv4 or IPv6 (repeatable), in addition to Nodes' spec.podCIDRs; traffic to it is never translated, and a family with no known pod range is not translated at all")
	fs.Var(&c.serviceCIDRs, "service-cidr", "Service CIDR of the cluster, IPv4 or IPv6 (repeatable), in addition to ServiceCIDR objects (run); traffic to it is never translated")
}

// registerLogDenied adds the flags that turn on logging of denied packets
// (tablelayout.LogDenied) for the pods of namespaces annotated
// nftguard.io/log-denied: "true".
func (c *common) registerLogDenied(fs *flag.FlagSet) {
	def := tablelayout.DefaultLogDenied()
	fs.BoolVar(&c.logDenied, "log-denied", false, `log denied packets of pods in namespaces annotated `+tablelayout.AnnotationLogDenied+`: "true" to an NFLOG group (read them with nftguard flows, or the agent logs them)`)
	fs.UintVar(&c.logGroup, "log-group", uint(def.Group), "NFLOG group of --log-denied")
	fs.UintVar(&c.logRate, "log-rate", uint(def.Rate), "denied packets logged per second and direction on the node, with --log-denied (the rest are dropped all the same, and counted)")
	fs.UintVar(&c.logBurst, "log-burst", uint(def.Burst), "packets logged at once after a quiet time, with --log-denied")
}

// logDeniedConfig is the --log-denied settings, nil when it is off.
func (c *common) logDeniedConfig() (*tablelayout.LogDenied, error) {
	if !c.logDenied {
		return nil, nil
	}
	if c.logGroup > math.MaxUint16 || c.logRate > math.MaxUint32 || c.logBurst > math.MaxUint32 {
		return nil, usagef("--log-group must be at most %d, --log-rate and --log-burst at most %d", math.MaxUint16, uint32(math.MaxUint32))
	}
	l := tablelayout.LogDenied{Group: uint16(c.logGroup), Rate: uint32(c.logRate), Burst: uint32(c.logBurst)}
	if err := l.Validate(); err != nil {
		return nil, usageError{fmt.Errorf("--log-denied: %w", err)}
	}
	return &l, nil
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
// and refuses positional arguments. Help that was asked for (-h, --help)
// goes to stdout; bad usage is a flagError carrying the usage for stderr.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	summary := ""
	for _, c := range commands() {
		if c.name == fs.Name() {
			summary = c.summary
		}
	}
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: nftguard %s [flags]\n\n%s\n", fs.Name(), summary)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(w, "\nflags:")
			fs.PrintDefaults()
		}
	}
	usage := func() string {
		var b strings.Builder
		fs.SetOutput(&b)
		fs.Usage()
		return b.String()
	}
	// The flag package reports errors to Output; run prints them once,
	// followed by the usage.
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage())
			return err
		}
		return flagError{err, usage()}
	}
	if fs.NArg() > 0 {
		return flagError{fmt.Errorf("unexpected argument %q", fs.Arg(0)), usage()}
	}
	return nil
}

// explicit says whether the flag was given on the command line, rather
// than left at its default.
func explicit(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
