package dnsfwd

import (
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestPodBudgetAdmit(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var b podBudget
	// Commits expiring at 10 s, 6 s, ..., against a limit of 10.
	if fit := b.admit(t0, t0.Add(10*time.Second), 6, 10); fit != 6 || b.n != 6 {
		t.Fatalf("first: fit %d held %d", fit, b.n)
	}
	if fit := b.admit(t0.Add(time.Second), t0.Add(6*time.Second), 6, 10); fit != 4 || b.n != 10 {
		t.Fatalf("second: fit %d held %d, want 4 and 10", fit, b.n)
	}
	if fit := b.admit(t0.Add(2*time.Second), t0.Add(3*time.Second), 1, 10); fit != 0 || b.n != 10 {
		t.Fatalf("full: fit %d held %d", fit, b.n)
	}
	// At 6 s the second commit's 4 expired: 4 fit again.
	if fit := b.admit(t0.Add(6*time.Second), t0.Add(20*time.Second), 5, 10); fit != 4 || b.n != 10 {
		t.Fatalf("after expiry: fit %d held %d, want 4 and 10", fit, b.n)
	}
	// At 20 s everything expired.
	if fit := b.admit(t0.Add(20*time.Second), t0.Add(21*time.Second), 3, 10); fit != 3 || b.n != 3 || len(b.held) != 1 {
		t.Fatalf("all expired: fit %d held %d entries %d", fit, b.n, len(b.held))
	}
}

// TestPodElementsLimit: a pod's answers add at most Limits.PodElements
// elements while they live; the answers beyond are relayed, add nothing,
// and are counted; another pod's budget is its own.
func TestPodElementsLimit(t *testing.T) {
	h := start(t, Limits{PodElements: 3})
	h.up.set("x.a.example", dns.TypeA, "x.a.example. 60 IN A 192.0.2.1", "x.a.example. 60 IN A 192.0.2.2")
	h.up.set("y.a.example", dns.TypeA, "y.a.example. 60 IN A 192.0.2.3", "y.a.example. 60 IN A 192.0.2.4")
	for _, name := range []string{"x.a.example.", "y.a.example."} {
		if r, err := h.query(t, podA, "udp", name, dns.TypeA); err != nil || len(r.Answer) != 2 {
			t.Fatalf("%s: %v %v", name, r, err)
		}
	}
	if got := h.com.keys("web4"); len(got) != 3 {
		t.Errorf("podA added %v, want its 3", got)
	}
	if c := counter(t, h.fwd.m.AddrsIgnored.WithLabelValues(addrsPodLimit)); c != 1 {
		t.Errorf("pod_limit addresses %v, want 1", c)
	}
	if r, err := h.query(t, podB, "udp", "x.a.example.", dns.TypeA); err != nil || len(r.Answer) != 2 {
		t.Fatalf("podB: %v %v", r, err)
	}
	n := 0
	for _, k := range h.com.keys("web4") {
		if strings.HasPrefix(k, podB.String()+" . ") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("podB added %d elements, want 2 (its own budget)", n)
	}
}
