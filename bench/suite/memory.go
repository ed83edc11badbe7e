package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// memoryMeasured is what TestAgentMemory (memory_test.go) reports.
type memoryMeasured struct {
	Pods, Policies, Nodes, LocalPods int
	Rules, Elements                  int
	CreateSeconds, FirstSyncSeconds  float64
	RSSAfterSyncKB, HWMAfterSyncKB   int
	Churn                            int
	ChurnSeconds                     float64
	RSSAfterChurnKB, HWMAfterChurnKB int
	// The first sync's parts: the informers' list and decode (from the
	// agent's log), the compile and the kernel sync (from its metrics).
	CachesSyncedSeconds, CompileSeconds, KernelSeconds float64
	// API load: what an informer set like the agent's
	// receives, counted by a wrapping RoundTripper (bytes after the
	// transport's gzip decoding), on its connection (wire bytes: TLS
	// records) and by its event handlers.
	APILoad apiLoad
	// MoreAgents are fresh agents started one after the other against
	// the same cluster with other memory limits (first sync only).
	MoreAgents []agentRun `json:",omitempty"`
}

// agentRun is one more agent's first sync.
type agentRun struct {
	GoMemLimit                                         string // "" for none
	FirstSyncSeconds                                   float64
	CachesSyncedSeconds, CompileSeconds, KernelSeconds float64
	RSSAfterSyncKB, HWMAfterSyncKB                     int
}

// apiLoad is what one agent-like watcher received.
type apiLoad struct {
	ContentType               string
	ListBytes, ListObjects    int64   // the initial lists, decoded
	ListWireBytes             int64   // the same on the wire
	ChurnBytes, ChurnEvents   int64   // watch events during the churn, decoded
	ChurnWireBytes            int64   // the same on the wire (compressed while the first watch-list streams last)
	ChurnSeconds              float64 // the churn's wall time
	ChurnWrites               int     // API writes the churn made
	PodEventsPerWrite         float64 // watch events per write
	BytesPerEvent             float64
	ProjectedMBPerMinPerAgent float64 // at 100 pod creations + deletions a second (see ENVELOPE.md)
}

// memoryResult is scenario 4: measured, or pending with the reason, so the
// report never shows a number that was not measured.
type memoryResult struct {
	Measured *memoryMeasured
	Pending  string
	Command  string
	Duration time.Duration
}

// runMemory measures `nftguard run` against the real test API server. It
// needs the agent subcommand and internal/kubetest (with its kube-apiserver
// and etcd binaries); kubetest runs only under testing, so the measurement
// is a test behind the benchmemory build tag, run as a subprocess.
func (r *runner) runMemory() (memoryResult, error) {
	var missing []string
	out, _ := exec.CommandContext(r.ctx, r.bin, "run", "-h").CombinedOutput()
	if !strings.Contains(string(out), "kubeconfig") {
		missing = append(missing, "`nftguard run` does not answer `run -h` with its flags")
	}
	if _, err := os.Stat(filepath.Join(r.root, "internal", "kubetest")); err != nil {
		missing = append(missing, "internal/kubetest does not exist")
	}
	if len(missing) > 0 {
		return memoryResult{Pending: strings.Join(missing, "; ")}, nil
	}
	path := filepath.Join(r.work, "memory.json")
	timeout := "20m"
	if r.prof.MemorySize.Pods > s10k.Pods {
		timeout = "4h" // creating 150k pods through one API server on 2 cores
	}
	args := []string{"test", "-tags", "benchmemory", "-run", "^TestAgentMemory$", "-count", "1", "-timeout", timeout, "-v", "."}
	res := memoryResult{Command: "go " + strings.Join(args, " ")}
	r.logf("memory: %s (churn %d)", res.Command, r.prof.Churn)
	env := []string{"NFTGUARD_BENCH_MEMORY_OUT=" + path, fmt.Sprintf("NFTGUARD_BENCH_CHURN=%d", r.prof.Churn)}
	if s := r.prof.MemorySize; s.Pods > 0 {
		env = append(env, fmt.Sprintf("NFTGUARD_BENCH_MEMORY_PODS=%d", s.Pods), fmt.Sprintf("NFTGUARD_BENCH_MEMORY_POLICIES=%d", s.Policies),
			fmt.Sprintf("NFTGUARD_BENCH_MEMORY_NODES=%d", r.prof.MemoryNodes))
	}
	res.Measured = &memoryMeasured{}
	var err error
	if res.Duration, err = r.testJSON("", args[1:], env, path, "memory", res.Measured); err != nil {
		res.Measured = nil
		return res, err
	}
	m := res.Measured
	r.logf("memory: RSS %d MB after sync, %d MB after %d changes", m.RSSAfterSyncKB/1024, m.RSSAfterChurnKB/1024, m.Churn)
	return res, nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func mb(kb int) float64 { return float64(kb) / 1024 }

func (m memoryResult) goal() string {
	if m.Measured == nil {
		why := m.Pending
		if why == "" {
			why = "the measurement failed (see Failures)"
		}
		return "Memory of `nftguard run` ≤ 100 MB after sync, no growth under churn: **pending** — not measured (" + why + ")."
	}
	x := m.Measured
	growth := mb(x.RSSAfterChurnKB) - mb(x.RSSAfterSyncKB)
	// "No growth" allows the Go heap's ordinary breathing: within 10%.
	noGrowth := float64(x.RSSAfterChurnKB) <= 1.1*float64(x.RSSAfterSyncKB)
	return fmt.Sprintf("Memory of `nftguard run` ≤ 100 MB after sync: %s — %.0f MB RSS. No growth under churn: %s — %+.0f MB after %d changes (%.0f MB).",
		verdict(mb(x.RSSAfterSyncKB) <= 100), mb(x.RSSAfterSyncKB), verdict(noGrowth), growth, x.Churn, mb(x.RSSAfterChurnKB))
}

func (m memoryResult) section(w io.Writer) {
	fmt.Fprintln(w, "## 4. Memory of `nftguard run`")
	fmt.Fprintln(w)
	if m.Measured == nil {
		fmt.Fprintf(w, "Not measured in this run: %s.\n\n", m.goal())
		return
	}
	x := m.Measured
	fmt.Fprintf(w, "`%s` (%s): a real kube-apiserver + etcd (internal/kubetest) holding the %d-pod / %d-policy synthetic cluster (Node, Namespaces, Pods created then given their status as a kubelet would, NetworkPolicies; created in %.0f s); `nftguard run --node-name %s --netns` (a fresh namespace) until its metrics report the expected table (%d rules, %d elements; %.1f s after start); then %d pod changes (label flips there and back, every tenth a delete + recreate; %.0f s), ending in the starting state, and the same table again. RSS is VmRSS of the agent process, read 2 s after the first sync and, after the churn, once no sync has run for 3 s; HWM is its peak (VmHWM). \"No growth\" is judged as RSS after churn within 10%% of RSS after the first sync.\n\n",
		m.Command, m.Duration.Round(time.Second), x.Pods, x.Policies, x.CreateSeconds, localNode, x.Rules, x.Elements, x.FirstSyncSeconds, x.Churn, x.ChurnSeconds)
	fmt.Fprintln(w, "One run, not three: setting up the 10k-pod cluster takes about a minute on this machine, so a difference within a few MB is noise until repeated.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| point | RSS | peak (HWM) |")
	fmt.Fprintln(w, "|---|---:|---:|")
	fmt.Fprintf(w, "| after first sync | %.1f MB | %.1f MB |\n", mb(x.RSSAfterSyncKB), mb(x.HWMAfterSyncKB))
	fmt.Fprintf(w, "| after %d changes | %.1f MB | %.1f MB |\n\n", x.Churn, mb(x.RSSAfterChurnKB), mb(x.HWMAfterChurnKB))
	fmt.Fprintf(w, "First table after %.1f s: informer caches synced (list + decode) %.1f s, compile %.3f s, kernel %.3f s (sums over the syncs until the table was complete).\n\n",
		x.FirstSyncSeconds, x.CachesSyncedSeconds, x.CompileSeconds, x.KernelSeconds)
	if a := x.APILoad; a.ListObjects > 0 {
		fmt.Fprintf(w, "API load of one agent-like informer set (%s): initial lists %.1f MB decoded, %.1f MB on the wire, %d objects; churn %d writes in %.0f s, %d events, %.2f MB decoded (%.0f B an event), %.2f MB on the wire.\n\n",
			a.ContentType, float64(a.ListBytes)/1e6, float64(a.ListWireBytes)/1e6, a.ListObjects, a.ChurnWrites, a.ChurnSeconds, a.ChurnEvents,
			float64(a.ChurnBytes)/1e6, a.BytesPerEvent, float64(a.ChurnWireBytes)/1e6)
	}
	if len(x.MoreAgents) > 0 {
		fmt.Fprintln(w, "More agents against the same cluster, one after the other, each in a fresh network namespace (first sync only; MB here are MiB, as above):")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| GOMEMLIMIT | first table | caches synced | compile | kernel | RSS after sync | peak (HWM) |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
		for _, a := range x.MoreAgents {
			limit := a.GoMemLimit
			if limit == "" {
				limit = "none"
			}
			fmt.Fprintf(w, "| %s | %.1f s | %.1f s | %.3f s | %.3f s | %.1f MB | %.1f MB |\n", limit, a.FirstSyncSeconds, a.CachesSyncedSeconds,
				a.CompileSeconds, a.KernelSeconds, mb(a.RSSAfterSyncKB), mb(a.HWMAfterSyncKB))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, m.goal())
	fmt.Fprintln(w)
}
