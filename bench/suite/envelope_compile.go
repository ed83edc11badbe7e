package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
)

// The envelope's compiler side, measured without an API
// server by the agent package's own test and benchmark: the live bytes per
// pod of the caches and compiled state (TestEnvelopeMemory) and the cost of
// one event, input + build + kernel sync (BenchmarkEnvelopeEvent), at 1k,
// 10k, 50k and 150k pods. They write JSON to $NFTGUARD_ENVELOPE_OUT; the
// field names are the agent test's EnvelopeMemoryRow and EnvelopeEventRow.

type envMemoryRow struct {
	Pods                                                      int
	Transform                                                 string
	PodCacheBytesPerPod, SelectionBytesPerPod, AllBytesPerPod float64
	OtherKindsBytes, AllBytes                                 uint64
}

type envEventRow struct {
	Pods                                    int
	Event                                   string
	Events                                  int
	WallNs, CPUNs, InputNs, BuildNs, SyncNs float64
}

// envCompileResult is the compiler side of the envelope.
type envCompileResult struct {
	Command  string
	Duration time.Duration
	Memory   []envMemoryRow
	Events   []envEventRow
}

// envEventsPerSize is how many events each size's benchmark makes.
const envEventsPerSize = 400

func (r *runner) runEnvelopeCompile() (envCompileResult, error) {
	dir := filepath.Join(r.work, "envelope")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return envCompileResult{}, err
	}
	args := []string{"test", "./agent", "-run", "^TestEnvelopeMemory$", "-bench", "^BenchmarkEnvelopeEvent$",
		"-benchtime", fmt.Sprintf("%dx", envEventsPerSize), "-count", "1", "-timeout", "60m"}
	res := envCompileResult{Command: "NFTGUARD_ENVELOPE=1 NFTGUARD_KERNEL_TESTS=1 go " + strings.Join(args, " ")}
	r.logf("envelope compile: %s", res.Command)
	cmd := exec.CommandContext(r.ctx, "go", args...)
	cmd.Dir = r.root
	cmd.Env = append(os.Environ(), "NFTGUARD_ENVELOPE=1", "NFTGUARD_KERNEL_TESTS=1", "NFTGUARD_ENVELOPE_OUT="+dir)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	res.Duration = time.Since(start)
	if err != nil {
		return res, fmt.Errorf("%s: %w\n%s", res.Command, err, tail(string(out), 40))
	}
	for name, v := range map[string]any{"memory.json": &res.Memory, "events.json": &res.Events} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return res, fmt.Errorf("envelope compile wrote no %s: %w", name, err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			return res, fmt.Errorf("envelope %s: %w", name, err)
		}
	}
	return res, nil
}

// byPods is one series: a value per cluster size.
type byPods struct{ xs, ys []float64 }

func (s byPods) Len() int                { return len(s.xs) }
func (s byPods) XY(i int) (x, y float64) { return s.xs[i], s.ys[i] }

// plotEnvelope draws the live bytes per pod by transform and the CPU per
// event by event, against the cluster's size.
func plotEnvelope(dir string, e envCompileResult) (memory, events string, err error) {
	draw := func(title, y, file string, names []string, series map[string]byPods) (string, error) {
		p := newPlot(title, "pods in the cluster", y, true, false)
		// From zero, with room above the lines for the legend: flat is
		// what these plots are read for.
		top := 0.0
		for _, s := range series {
			for _, v := range s.ys {
				top = max(top, v)
			}
		}
		p.Y.Min, p.Y.Max = 0, top*1.5
		for i, n := range names {
			line, points, err := plotter.NewLinePoints(series[n])
			if err != nil {
				return "", fmt.Errorf("series %s: %w", n, err)
			}
			c := plotutil.Color(i)
			line.Color, points.Color, points.Shape = c, c, plotutil.Shape(i)
			p.Add(line, points)
			p.Legend.Add(n, line, points)
		}
		return save(p, dir, file)
	}
	mem, memNames := map[string]byPods{}, []string(nil)
	for _, m := range e.Memory {
		if _, ok := mem[m.Transform]; !ok {
			memNames = append(memNames, m.Transform)
		}
		s := mem[m.Transform]
		s.xs, s.ys = append(s.xs, float64(m.Pods)), append(s.ys, m.AllBytesPerPod)
		mem[m.Transform] = s
	}
	ev, evNames := map[string]byPods{}, []string(nil)
	for _, x := range e.Events {
		if _, ok := ev[x.Event]; !ok {
			evNames = append(evNames, x.Event)
		}
		s := ev[x.Event]
		s.xs, s.ys = append(s.xs, float64(x.Pods)), append(s.ys, x.CPUNs/1e6)
		ev[x.Event] = s
	}
	if memory, err = draw("Live bytes per pod: caches + compiled state", "bytes per pod", "envelope-memory.png", memNames, mem); err != nil {
		return "", "", err
	}
	events, err = draw("One event: input + build + kernel sync", "CPU ms per event", "envelope-events.png", evNames, ev)
	return memory, events, err
}

func (e envCompileResult) section(w io.Writer, plots map[string]string) {
	if len(e.Memory) == 0 && len(e.Events) == 0 {
		return
	}
	fmt.Fprintln(w, "## Envelope: the compilers' side")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "`%s` (%s) in the repository root: the agent's caches as its informers hold them (client-go indexers, the informer's transform), no API server. **Memory**: live heap after a full collection, per pod, for three transforms: the API objects (as cached before podset records), unshared records, and the agent's (records with equal labels and ports shared). **Events**: %d events per size, each alternating a change and its undo, each read as the agent's sync loop reads its caches, built, and synced into a real kernel table in a fresh network namespace; the same events at every size (replicas of pod 0, on the agent's node, or of a remote pod; pod 0 relabelled; an 11th policy in namespace 0 selecting pod 0's Deployment). CPU is the process's, collection included.\n\n",
		e.Command, e.Duration.Round(time.Second), envEventsPerSize)
	if name, ok := plots["envelope-memory"]; ok {
		fmt.Fprintf(w, "![live bytes per pod](%s)\n\n", name)
	}
	fmt.Fprintln(w, "| pods | transform | pod cache (B/pod) | selection (B/pod) | other kinds | caches + compiled | B/pod |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|")
	for _, m := range e.Memory {
		fmt.Fprintf(w, "| %d | %s | %.0f | %.0f | %.1f MB | %.1f MB | %.0f |\n", m.Pods, m.Transform, m.PodCacheBytesPerPod, m.SelectionBytesPerPod,
			float64(m.OtherKindsBytes)/1e6, float64(m.AllBytes)/1e6, m.AllBytesPerPod)
	}
	fmt.Fprintln(w)
	if name, ok := plots["envelope-events"]; ok {
		fmt.Fprintf(w, "![CPU per event](%s)\n\n", name)
	}
	first := map[string]envEventRow{}
	for _, x := range e.Events {
		if _, ok := first[x.Event]; !ok {
			first[x.Event] = x
		}
	}
	fmt.Fprintln(w, "| pods | event | wall per event | input | build | kernel sync | CPU per event | CPU vs the smallest size |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|")
	for _, x := range e.Events {
		fmt.Fprintf(w, "| %d | %s | %.3f ms | %.3f ms | %.3f ms | %.3f ms | %.3f ms | %.2f× |\n", x.Pods, x.Event, x.WallNs/1e6, x.InputNs/1e6,
			x.BuildNs/1e6, x.SyncNs/1e6, x.CPUNs/1e6, x.CPUNs/first[x.Event].CPUNs)
	}
	fmt.Fprintln(w)
}
