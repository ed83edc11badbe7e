package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/doctor"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/podguard"
)

// runDoctor is the read-only host check. Exit codes: 0 nothing above a
// warning, 1 errors found, 2 the namespace could not be inspected.
func runDoctor(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	var c common
	var in input
	var output, metricsURL string
	var probe bool
	c.register(fs)
	c.registerEgress(fs)
	fs.Var(&in.files, "f", "manifests (as for render) to compare nftguard's table with (optional, repeatable)")
	fs.StringVar(&output, "o", "text", "output format: text or json")
	fs.StringVar(&metricsURL, "metrics-url", "", "a live agent's metrics endpoint, to report the age of its last sync (optional)")
	fs.BoolVar(&probe, "probe", true, "probe kernel features in a private scratch namespace")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	c.nodeNameSet = explicit(fs, "node-name")
	if output != "text" && output != "json" {
		return usagef("-o must be text or json")
	}
	var desired *engine.Desired
	if len(in.files) > 0 {
		// The table apply would program there, guard chains included:
		// reading the interfaces is read-only.
		read := kernelInterfaces(c)
		ifs := func() ([]podguard.Interface, error) {
			ifs, err := read()
			if err != nil {
				return nil, usageError{fmt.Errorf("could not inspect: %w", err)}
			}
			return ifs, nil
		}
		d, _, err := load(stdin, in, c, ifs, stderr)
		if err != nil {
			return err
		}
		desired = d
	}
	rep, err := doctor.Run(ctx, doctor.Options{
		NetNS: c.netns, Table: compose.Table(), Hooks: doctor.OwnHooks(), Desired: desired,
		Probe: probe, MetricsURL: metricsURL,
	})
	if err != nil {
		return usageError{fmt.Errorf("could not inspect: %w", err)}
	}
	if output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		for _, f := range rep.Findings {
			fmt.Fprintln(stdout, f)
		}
		fmt.Fprintf(stdout, "%d error(s), %d warning(s), %d info\n", rep.Count(doctor.Error), rep.Count(doctor.Warning), rep.Count(doctor.Info))
	}
	if rep.Worst() == doctor.Error {
		return fmt.Errorf("%d error(s) found", rep.Count(doctor.Error))
	}
	return nil
}
