package cnpconformance

import (
	"encoding/json"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

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
// container as the API server and kubelet would, resolves a host name as
// the pod's resolver would (through the cluster DNS, from the pod's
// network namespace), then runs the agnhost connect probe from the pod's
// network namespace (netlab.Runtime.Connect).
type execBridge struct {
	k          *kubelet
	rt         *netlab.Runtime
	clusterDNS netip.Addr // the kube-dns ClusterIP, the pods' nameserver
	log        *log.Logger

	mu     sync.Mutex
	counts map[string]int // probe outcomes by first word ("ok", "TIMEOUT", ...)
}

func newExecBridge(k *kubelet, rt *netlab.Runtime, clusterDNS netip.Addr, logger *log.Logger) *execBridge {
	return &execBridge{k: k, rt: rt, clusterDNS: clusterDNS, log: logger, counts: map[string]int{}}
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
	addr, isAddr := cmd.addr()
	var res netlab.ConnectResult
	var dst *netlab.Endpoint
	if !isAddr {
		var status int
		addr, res, status, err = b.resolve(pod, att, cmd.Host)
		if err != nil {
			b.log.Printf("exec %s/%s %q: %v", req.Namespace, req.Pod, req.Command, err)
			http.Error(w, err.Error(), status)
			return
		}
	}
	target := netip.AddrPortFrom(addr, cmd.Port)
	if addr.IsValid() {
		dst = b.k.endpointAt(addr)
		res, err = b.rt.Connect(r.Context(), att.ep, dst, cmd.Proto, target, cmd.Timeout)
		if err != nil {
			b.log.Printf("exec %s/%s %q: %v", req.Namespace, req.Pod, req.Command, err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
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
	if !isAddr {
		dstName = cmd.Host + " " + dstName
	}
	b.log.Printf("probe %s/%s -> %v %s (%s) timeout %v: %s", req.Namespace, req.Pod, target, cmd.Proto, dstName, cmd.Timeout, outcome)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(execResponse{Stderr: res.Stderr, ExitCode: res.Exit})
}

// resolve looks host up from the pod's network namespace as agnhost
// connect does before it connects (Go's resolver under the pod's
// resolv.conf). A failed lookup is agnhost's answer, "DNS: " and the
// resolver's error with exit 1, in res with an invalid addr; err (and its
// HTTP status) is for what a cluster would not run at all.
func (b *execBridge) resolve(pod *corev1.Pod, att *attachment, host string) (addr netip.Addr, res netlab.ConnectResult, status int, err error) {
	switch pod.Spec.DNSPolicy {
	case "", corev1.DNSClusterFirst:
		if pod.Spec.HostNetwork {
			return addr, res, http.StatusBadRequest, fmt.Errorf("host-network pod %s/%s resolves through its node, and the lab's nodes have no resolver", pod.Namespace, pod.Name)
		}
	case corev1.DNSClusterFirstWithHostNet:
	default:
		return addr, res, http.StatusBadRequest, fmt.Errorf("pod %s/%s: dnsPolicy %s is not modelled by the lab", pod.Namespace, pod.Name, pod.Spec.DNSPolicy)
	}
	if !b.clusterDNS.IsValid() {
		return addr, res, http.StatusInternalServerError, fmt.Errorf("the lab has no cluster DNS to resolve %s", host)
	}
	rc := podResolvConf(b.clusterDNS, pod.Namespace)
	var addrs []netip.Addr
	var lookupErr error
	err = netlab.InNetNS(att.ep.Path, func() error {
		addrs, lookupErr = rc.lookup(host, func(network, a string) (net.Conn, error) { return net.Dial(network, a) })
		return nil
	})
	if err != nil {
		return addr, res, http.StatusInternalServerError, fmt.Errorf("enter %s's namespace: %w", pod.Name, err)
	}
	if lookupErr != nil {
		return addr, netlab.ConnectResult{Stderr: "DNS: " + lookupErr.Error() + "\n", Exit: 1}, http.StatusOK, nil
	}
	return pickAddr(addrs), res, http.StatusOK, nil
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
