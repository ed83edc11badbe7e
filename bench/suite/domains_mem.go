package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/testns"
)

// Scenario 9's memory half. The kernel charges nf_tables set elements
// (and ipset's) to the memory cgroup of the process whose netlink message
// creates them, so the elements are added by a child process that is in
// a memory cgroup of its own from its first instruction, pinned to one
// CPU with GOMAXPROCS=1; the cgroup's kernel-memory counter before and
// after the adds is what they cost. The child is this program again,
// told what to do by the environment.

// domMem is one child's measurement.
type domMem struct {
	Elements, Answers int
	Seconds           float64 // wall time of the adds
	UserSeconds       float64 // the child's CPU during the adds
	SysSeconds        float64
	// KmemBytes is the growth of the cgroup's memory.kmem.usage_in_bytes
	// (cgroup v1): kernel memory charged to the adding process.
	KmemBytes int64
	// SlabBytes and VmallocBytes are the growth of the machine's Slab
	// and VmallocUsed (/proc/meminfo): allocations not charged to a
	// cgroup show there, and so does every other process's.
	SlabBytes, VmallocBytes int64
	// IPSetBytes is ipset's own "Size in memory" (ipset only).
	IPSetBytes int64
	// Counted is how many elements the set holds afterwards, read back.
	Counted int
	// CommentBytes is the length of each element's comment (the answer's
	// question name, as the agent stores it); 0 without comments.
	CommentBytes int
}

func (m domMem) perElement(b int64) float64 { return float64(b) / float64(m.Elements) }
func (m domMem) answersPerSec() float64     { return float64(m.Answers) / m.Seconds }
func (m domMem) cpuPerAnswer() float64 {
	return (m.UserSeconds + m.SysSeconds) / float64(m.Answers)
}

const (
	domChildEnv = "NFTGUARD_BENCH_DOMAINS_CHILD" // "nft", "nft-named" or "ipset"
	domNSEnv    = "NFTGUARD_BENCH_DOMAINS_NS"
	domCgEnv    = "NFTGUARD_BENCH_DOMAINS_CGROUP"
	domSizeEnv  = "NFTGUARD_BENCH_DOMAINS_SIZE" // "NAMES,PERNAME"
	domIPSet    = "bench-pairs"
)

// domainsMemory runs MemReps × (nft, nft with comments, ipset)
// children, each in a fresh namespace and cgroup.
func (r *runner) domainsMemory(res *domainsResult) error {
	spec := r.prof.Domains
	if n := spec.Names * spec.PerName; n > 1<<17-2 {
		return fmt.Errorf("domains: %d elements do not fit 198.18.0.0/15", n)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	for rep := range spec.MemReps {
		for _, kind := range []string{"nft", "nft-named", "ipset"} {
			var m domMem
			err := r.inNS(func(ns *testns.NS) error {
				var err error
				m, err = r.domainsChild(exe, kind, ns.Path)
				return err
			})
			if err != nil {
				return fmt.Errorf("domains memory (%s), repetition %d: %w", kind, rep+1, err)
			}
			r.logf("domains: %s: %d elements in %d answers: %.2f s (%.0f answers/s, CPU %.1f µs an answer), kernel memory +%.1f MiB (%.0f B an element; machine Slab %+.1f MiB, vmalloc %+.1f MiB)",
				kind, m.Elements, m.Answers, m.Seconds, m.answersPerSec(), m.cpuPerAnswer()*1e6, float64(m.KmemBytes)/(1<<20), m.perElement(m.KmemBytes),
				float64(m.SlabBytes)/(1<<20), float64(m.VmallocBytes)/(1<<20))
			switch kind {
			case "nft":
				res.Mem = append(res.Mem, m)
			case "nft-named":
				res.MemNamed = append(res.MemNamed, m)
			default:
				res.IPSet = append(res.IPSet, m)
			}
		}
	}
	return nil
}

// memCgroupDir is the v1 memory cgroup of this process.
func memCgroupDir() (string, error) {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return "", fmt.Errorf("cgroup v2 is not supported by this scenario (it reads v1's memory.kmem.usage_in_bytes)")
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for l := range strings.Lines(string(own)) {
		if f := strings.SplitN(strings.TrimSpace(l), ":", 3); len(f) == 3 && f[1] == "memory" {
			return filepath.Join("/sys/fs/cgroup/memory", f[2]), nil
		}
	}
	return "", fmt.Errorf("no v1 memory cgroup in /proc/self/cgroup")
}

// domainsChild runs one child in a new memory cgroup under this
// process's own, and removes the cgroup after it.
func (r *runner) domainsChild(exe, kind, nsPath string) (m domMem, err error) {
	parent, err := memCgroupDir()
	if err != nil {
		return m, err
	}
	cg := filepath.Join(parent, fmt.Sprintf("nftguard-bench-domains-%d", os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		return m, fmt.Errorf("create memory cgroup: %w", err)
	}
	defer func() {
		for range 50 {
			if rerr := os.Remove(cg); rerr == nil || os.IsNotExist(rerr) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err == nil {
			err = fmt.Errorf("memory cgroup %s not removed", cg)
		}
	}()
	cpu := strconv.Itoa(runtime.NumCPU() - 1)
	cmd := exec.CommandContext(r.ctx, "/bin/sh", "-c", `echo $$ > "$0/cgroup.procs" && exec taskset -c "$1" "$2"`, cg, cpu, exe)
	spec := r.prof.Domains
	cmd.Env = append(os.Environ(), domChildEnv+"="+kind, domNSEnv+"="+nsPath, domCgEnv+"="+cg,
		fmt.Sprintf("%s=%d,%d", domSizeEnv, spec.Names, spec.PerName), "GOMAXPROCS=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return m, fmt.Errorf("child: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal(out, &m); err != nil {
		return m, fmt.Errorf("child's result %q: %w", out, err)
	}
	if m.Counted != m.Elements {
		return m, fmt.Errorf("%s: the set holds %d elements, %d were added", kind, m.Counted, m.Elements)
	}
	return m, nil
}

// domainsChildMain is the child: it adds the elements and prints a domMem
// as JSON.
func domainsChildMain(kind string) error {
	nsPath, cg := os.Getenv(domNSEnv), os.Getenv(domCgEnv)
	var nNames, per int
	if _, err := fmt.Sscanf(os.Getenv(domSizeEnv), "%d,%d", &nNames, &per); err != nil || nNames < 1 || per < 1 || nNames > 99999 {
		return fmt.Errorf("%s=%q: want NAMES,PERNAME, NAMES < 100000", domSizeEnv, os.Getenv(domSizeEnv))
	}
	pod := netip.MustParseAddr(labAddr("client"))
	addrs := make([]netip.Addr, nNames*per)
	a := netip.MustParseAddr("198.18.0.0")
	for i := range addrs {
		a = a.Next()
		addrs[i] = a
	}
	m := domMem{Elements: len(addrs), Answers: nNames}
	var add func(answer []netip.Addr) error
	var count func() (int, error)
	switch kind {
	case "nft", "nft-named":
		ctx := context.Background()
		d, fill, err := domainsTable(domConfig{domDomain, 1})
		if err != nil {
			return err
		}
		set := fill[0].Set
		e, err := engine.New(compose.Table(), engine.WithNetNS(nsPath))
		if err != nil {
			return err
		}
		defer e.Close()
		if _, err := e.Sync(ctx, d); err != nil {
			return err
		}
		// Opens AddTimed's socket before the baseline.
		if _, err := e.ReadTimed(ctx, set); err != nil {
			return err
		}
		elems := make([]engine.TimedElement, 0, per)
		prefix := pod.String() + " . "
		keys := make([]string, len(addrs))
		for i, a := range addrs {
			keys[i] = prefix + a.String()
		}
		// The agent stores each answer's question name with its
		// elements; nft-named does the same, one name an answer.
		var names []string
		if kind == "nft-named" {
			names = make([]string, nNames)
			for i := range names {
				names[i] = memName(i)
			}
			m.CommentBytes = len(names[0])
		}
		k := 0
		add = func(answer []netip.Addr) error {
			elems = elems[:0]
			comment := ""
			if names != nil {
				comment = names[k/per]
			}
			for range answer {
				elems = append(elems, engine.TimedElement{Set: set, Key: keys[k], Timeout: time.Hour, Comment: comment})
				k++
			}
			return e.AddTimed(ctx, elems)
		}
		count = func() (int, error) {
			st, err := e.ReadTimed(ctx, set)
			return len(st), err
		}
	case "ipset":
		nsh, err := netns.GetFromPath(nsPath)
		if err != nil {
			return err
		}
		defer nsh.Close()
		h, err := netlink.NewHandleAt(nsh, unix.NETLINK_NETFILTER)
		if err != nil {
			return err
		}
		defer h.Close()
		timeout := uint32(3600)
		// hash:ip,port,ip with a fixed port is the pair set this
		// kernel builds in (hash:net,net is not).
		if err := h.IpsetCreate(domIPSet, "hash:ip,port,ip", netlink.IpsetCreateOptions{Timeout: &timeout, MaxElements: uint32(2 * len(addrs))}); err != nil {
			return fmt.Errorf("ipset create: %w", err)
		}
		proto, port := uint8(unix.IPPROTO_TCP), uint16(0)
		podIP := net.IP(pod.AsSlice())
		entry := netlink.IPSetEntry{IP: podIP, Protocol: &proto, Port: &port, Timeout: &timeout, Replace: true}
		add = func(answer []netip.Addr) error {
			for _, a := range answer {
				entry.IP2 = net.IP(a.AsSlice())
				if err := h.IpsetAdd(domIPSet, &entry); err != nil {
					return fmt.Errorf("ipset add %v: %w", a, err)
				}
			}
			return nil
		}
		count = func() (int, error) {
			res, err := h.IpsetList(domIPSet)
			if err != nil {
				return 0, err
			}
			m.IPSetBytes = int64(res.SizeInMemory)
			return int(res.NumEntries), nil
		}
	default:
		return fmt.Errorf("%s=%q: want nft, nft-named or ipset", domChildEnv, kind)
	}
	runtime.GC()
	kmem0, slab0, vm0, err := kernelMemory(cg)
	if err != nil {
		return err
	}
	var ru0, ru1 unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru0); err != nil {
		return err
	}
	start := time.Now()
	for i := 0; i < len(addrs); i += per {
		if err := add(addrs[i : i+per]); err != nil {
			return err
		}
	}
	m.Seconds = time.Since(start).Seconds()
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru1); err != nil {
		return err
	}
	kmem1, slab1, vm1, err := kernelMemory(cg)
	if err != nil {
		return err
	}
	m.UserSeconds = tvSec(ru1.Utime) - tvSec(ru0.Utime)
	m.SysSeconds = tvSec(ru1.Stime) - tvSec(ru0.Stime)
	m.KmemBytes, m.SlabBytes, m.VmallocBytes = kmem1-kmem0, slab1-slab0, vm1-vm0
	if m.Counted, err = count(); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(m)
}

// memName is answer i's question name, 33 bytes for i < 100000: a
// typical service name under domPattern.
func memName(i int) string { return fmt.Sprintf("api-%05d.eu-west-1.bench.example", i) }

func tvSec(t unix.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// kernelMemory reads the cgroup's kernel memory charge and the machine's
// Slab and VmallocUsed, in bytes.
func kernelMemory(cg string) (kmem, slab, vmalloc int64, err error) {
	b, err := os.ReadFile(filepath.Join(cg, "memory.kmem.usage_in_bytes"))
	if err != nil {
		return 0, 0, 0, err
	}
	if kmem, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil {
		return 0, 0, 0, fmt.Errorf("memory.kmem.usage_in_bytes: %w", err)
	}
	kb := func(key string) (int64, error) {
		v := procField("/proc/meminfo", key)
		n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(v, "kB")), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/meminfo %s %q: %w", key, v, err)
		}
		return n * 1024, nil
	}
	if slab, err = kb("Slab"); err != nil {
		return 0, 0, 0, err
	}
	if vmalloc, err = kb("VmallocUsed"); err != nil {
		return 0, 0, 0, err
	}
	return kmem, slab, vmalloc, nil
}
