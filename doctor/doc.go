// Package doctor is nftguard's read-only host check. It reads the whole
// nftables ruleset of a network namespace over netlink (dump requests only)
// and the iptables-legacy table list, and reports findings: kernel features
// nftguard needs, foreign base chains on the hooks nftguard uses and whether
// they drop what nftguard accepts, two iptables userspaces programming one
// host, and rules that a save/restore cycle by another userspace would
// change (the iptables 1.8.7/1.8.8 `-m mark` class of failure).
//
// Reading is the only thing it does in the inspected namespace. The feature
// probe writes, but only into a private network namespace it creates for
// itself on a locked thread and that dies with that thread.
//
// The nftables side is read with engine.List, so chains, sets, hooks and
// expressions are decoded by the engine's own codec, once; doctor adds
// only what is its own: the iptables-legacy tables, and a description of
// rules the engine's renderer cannot print.
//
// Given the table the manifests produce (Options.Desired), doctor programs
// it into a private scratch namespace, reads it back the same way and
// compares the two (diff.go): rules aligned by a longest common
// subsequence, and a difference that may let through what the manifests
// stop reported as an error.
//
// The checks (Check) are pure functions of a Ruleset, so they are
// table-tested without a kernel; Read and Probe are the only I/O.
//
// # Where things are
//
//	doctor.go   Run, Options, Report: read, probe, check, in that order
//	model.go    Ruleset, Table, Chain, Rule, Set: what was read
//	read.go     Read: the namespace's whole ruleset through dump requests
//	legacy.go   the iptables-legacy tables, through the x_tables
//	            getsockopt interface
//	netns.go    the private network namespace the probe writes in
//	probe.go    Probe: the kernel features nftguard needs
//	check.go    Check, Config, Hook: the findings (pure)
//	hooks.go    OwnHooks: the base chains of nftguard's own table
//	diff.go     our table against the one -f manifests compile to
//	render.go   rules as nft text where nftguard's renderer can, described
//	            otherwise
//	metrics.go  a live agent's last sync, from its metrics
package doctor
