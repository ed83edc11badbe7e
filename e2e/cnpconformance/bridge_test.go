package cnpconformance

import (
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"strings"
	"sync"

	"github.com/nftguard/nftguard/internal/netlab"
)

// The wire format of testdata/exec_bridge.go.txt.
type execRequest struct {
	Namespace string   `json:"namespace"`
	Pod       string   `json:"pod"`
	Container string   `json:"container"`
	Command   []string `json:"command"`
}

type execResponse struct {
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exitCode"`
}

// execBridge answers the patched RunCommandFromPod: it checks the pod and
// container as the API server and kubelet would, then runs the agnhost
// connect probe from the pod's network namespace (netlab.Runtime.Connect).
type execBridge struct {
	k   *kubelet
	rt  *netlab.Runtime
	log *log.Logger

	mu     sync.Mutex
	counts map[string]int // probe outcomes by first word ("ok", "TIMEOUT", ...)
}

func newExecBridge(k *kubelet, rt *netlab.Runtime, logger *log.Logger) *execBridge {
	return &execBridge{k: k, rt: rt, log: logger, counts: map[string]int{}}
}

func (b *execBridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	var req execRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	pod, att, err := b.k.lookup(req.Namespace, req.Pod)
	if err != nil {
		b.log.Printf("exec %s/%s: %v", req.Namespace, req.Pod, err)
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	found := false
	for _, c := range pod.Spec.Containers {
		found = found || c.Name == req.Container
	}
	if !found {
		// What the API server answers for an unknown container.
		msg := fmt.Sprintf("container %s is not valid for pod %s", req.Container, req.Pod)
		http.Error(w, msg, http.StatusBadRequest)
		return
	}
	cmd, err := parseConnect(req.Command)
	if err != nil {
		b.log.Printf("exec %s/%s %q: %v", req.Namespace, req.Pod, req.Command, err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	dst := b.k.endpointAt(cmd.Target.Addr())
	res, err := b.rt.Connect(r.Context(), att.ep, dst, cmd.Proto, cmd.Target, cmd.Timeout)
	if err != nil {
		b.log.Printf("exec %s/%s %q: %v", req.Namespace, req.Pod, req.Command, err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	outcome := "ok"
	if !res.OK() {
		outcome, _, _ = strings.Cut(strings.TrimSpace(res.Stderr), ":")
	}
	b.mu.Lock()
	b.counts[outcome]++
	b.mu.Unlock()
	dstName := "(no lab endpoint)"
	if dst != nil {
		dstName = dst.Name
	}
	b.log.Printf("probe %s/%s -> %v %s (%s) timeout %v: %s", req.Namespace, req.Pod, cmd.Target, cmd.Proto, dstName, cmd.Timeout, outcome)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(execResponse{Stderr: res.Stderr, ExitCode: res.Exit})
}

// Counts returns the probe outcomes so far.
func (b *execBridge) Counts() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]int{}
	for k, v := range b.counts {
		out[k] = v
	}
	return out
}
