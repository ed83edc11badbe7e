package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/nftguard/nftguard/internal/netlab"
)

func newCommand(bin string, args ...string) *exec.Cmd { return exec.Command(bin, args...) }

// nftOut runs the nft binary inside a lab namespace: the demo's stand-in
// for an administrator's hand (nftguard itself never runs it). "-f -"
// reads the script from the last argument.
func (d *agentDemo) nftOut(where string, args ...string) (string, error) {
	path, err := d.lab.PathOf(where)
	if err != nil {
		return "", err
	}
	var stdin string
	if len(args) == 3 && args[0] == "-f" && args[1] == "-" {
		stdin, args = args[2], args[:2]
	}
	cmd := exec.Command("nsenter", append([]string{"--net=" + path, "--", "nft"}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("nft %s in %s: %w: %s (make demo installs nftables and util-linux)", strings.Join(args, " "), where, err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

func (d *agentDemo) nft(where string, args ...string) error {
	_, err := d.nftOut(where, args...)
	return err
}

// placeAddr, run inside a node, puts addr on lo (here) or routes it via the
// node that has it.
func placeAddr(addr netip.Addr, here bool, via netip.Addr) error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return err
	}
	dst := &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(addr.BitLen(), addr.BitLen())}
	a := &netlink.Addr{IPNet: dst}
	// Either may be absent.
	netlink.AddrDel(lo, a)
	netlink.RouteDel(&netlink.Route{Dst: dst})
	if here {
		return netlink.AddrAdd(lo, a)
	}
	return netlink.RouteAdd(&netlink.Route{Dst: dst, Gw: via.AsSlice()})
}

// recorder is the outside host's server: it answers each TCP connection
// with the source address it came from, and remembers every one.
type recorder struct {
	ln    net.Listener
	mu    sync.Mutex
	seen  []string
	marks map[string]int
}

func startRecorder(lab *netlab.Lab, host string, port int) (*recorder, error) {
	r := &recorder{marks: map[string]int{}}
	err := lab.Run(host, func() error {
		var err error
		r.ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", port))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen in %s: %w", host, err)
	}
	go func() {
		for {
			c, err := r.ln.Accept()
			if err != nil {
				return
			}
			src := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap().String()
			r.mu.Lock()
			r.seen = append(r.seen, src)
			r.mu.Unlock()
			fmt.Fprintf(c, "%s\n", src)
			c.Close()
		}
	}()
	return r, nil
}

// mark names the present moment; since returns the sources seen after a mark.
func (r *recorder) mark(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.marks[name] = len(r.seen)
	return len(r.seen)
}

func (r *recorder) since(i int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen[i:]...)
}

func (r *recorder) sinceMark(name string) []string {
	r.mu.Lock()
	i := r.marks[name]
	r.mu.Unlock()
	return r.since(i)
}

func (r *recorder) close() { r.ln.Close() }

// metrics is one scrape of an agent's /metrics (Prometheus text).
type metrics string

func (ag *agentProc) scrape() (metrics, error) {
	resp, err := http.Get("http://" + ag.metrics + "/metrics")
	if err != nil {
		return "", fmt.Errorf("scrape the agent of %s: %w", ag.node, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return metrics(b), err
}

// value is one series' value ("name{label=...}" as exposed), 0 when absent.
func (m metrics) value(series string) float64 {
	for _, line := range strings.Split(string(m), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return 0
}

// latency waits until the agent has put a change of kind into the kernel
// since the scrape before, and returns how long that took on average, by
// the agent's own histogram (observed when the sync ends, a little after
// the kernel has the change).
func (ag *agentProc) latency(ctx context.Context, kind string, before metrics) (time.Duration, error) {
	sum := fmt.Sprintf(`nftguard_event_to_kernel_seconds_sum{kind=%q}`, kind)
	count := fmt.Sprintf(`nftguard_event_to_kernel_seconds_count{kind=%q}`, kind)
	var m metrics
	err := poll(ctx, 10*time.Second, 10*time.Millisecond, func() (bool, error) {
		var err error
		m, err = ag.scrape()
		return m.value(count) > before.value(count), err
	})
	if err != nil {
		return 0, fmt.Errorf("the agent of %s measured no %s change: %w", ag.node, kind, err)
	}
	s := (m.value(sum) - before.value(sum)) / (m.value(count) - before.value(count))
	return time.Duration(s * float64(time.Second)), nil
}

// await waits until the agent's series has the value want.
func (ag *agentProc) await(ctx context.Context, series string, want float64) error {
	err := poll(ctx, 10*time.Second, 10*time.Millisecond, func() (bool, error) {
		m, err := ag.scrape()
		return m.value(series) == want, err
	})
	if err != nil {
		return fmt.Errorf("the agent of %s: %s is not %v: %w", ag.node, series, want, err)
	}
	return nil
}

// hostState is what the demo must leave as it found it: the host's
// ruleset and network sysctls.
type hostState struct {
	ruleset string
	sysctls map[string]string
}

// sysctlDirs are read (their files, not sub-folders) in the host's own
// network namespace: /proc/sys/net shows the reading thread's.
var sysctlDirs = []string{
	"/proc/sys/net/ipv4", "/proc/sys/net/ipv4/conf/all", "/proc/sys/net/ipv4/conf/default",
	"/proc/sys/net/ipv6/conf/all", "/proc/sys/net/ipv6/conf/default",
	"/proc/sys/net/bridge", "/proc/sys/net/netfilter", "/proc/sys/net/core",
}

func snapshotHost() (hostState, error) {
	// -s leaves out counters, which other traffic changes.
	out, err := exec.Command("nft", "-s", "list", "ruleset").CombinedOutput()
	if err != nil {
		return hostState{}, fmt.Errorf("nft -s list ruleset: %w: %s (make demo installs nftables)", err, out)
	}
	h := hostState{ruleset: string(out), sysctls: map[string]string{}}
	for _, dir := range sysctlDirs {
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue // IPv6 or br_netfilter absent
		}
		for _, e := range ents {
			if e.IsDir() || strings.HasSuffix(e.Name(), "_count") {
				continue // conntrack's entry count changes with traffic
			}
			p := filepath.Join(dir, e.Name())
			if b, err := os.ReadFile(p); err == nil {
				h.sysctls[p] = string(b)
			}
		}
	}
	return h, nil
}

// diff says what changed from h to now ("" for nothing).
func (h hostState) diff(now hostState) string {
	var out []string
	if h.ruleset != now.ruleset {
		out = append(out, fmt.Sprintf("ruleset before:\n%s\nruleset after:\n%s", h.ruleset, now.ruleset))
	}
	var keys []string
	for k := range h.sysctls {
		keys = append(keys, k)
	}
	// A key only now present is not a changed setting: a kernel module
	// loaded meanwhile (nf_conntrack, when nothing had used it) brings
	// its own, at their defaults.
	sort.Strings(keys)
	for _, k := range keys {
		if a, b := h.sysctls[k], now.sysctls[k]; a != b {
			if _, ok := now.sysctls[k]; !ok {
				b = "(gone)"
			}
			out = append(out, fmt.Sprintf("%s: %q -> %q", strings.TrimPrefix(k, "/proc/sys/"), strings.TrimSpace(a), strings.TrimSpace(b)))
		}
	}
	return strings.Join(out, "\n")
}
