package agent

import (
	"fmt"
	"sync"
	"time"
)

// health is what /readyz reports: ready once a sync succeeded, and not
// ready again while the latest sync failed, so a node whose table no longer
// follows the cluster drops out of readiness (and its alerts fire) instead
// of looking fine.
type health struct {
	mu          sync.Mutex
	synced      bool   // a sync succeeded since start
	lastErr     string // the latest sync's error; "" after a success
	quarantined int    // objects held back at the latest successful sync
	// peersStaleSince is when the peer records became stale (slices
	// mode, see peers.go); zero while they are fresh.
	peersStaleSince time.Time
}

// peersStale records since when the peer records are stale; the zero
// time says they are fresh.
func (h *health) peersStale(since time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.peersStaleSince = since
}

// succeeded records a successful sync and reports whether it is the first.
func (h *health) succeeded(quarantined int) (first bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	first = !h.synced
	h.synced, h.lastErr, h.quarantined = true, "", quarantined
	return first
}

func (h *health) failed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastErr = err.Error()
}

// ready returns the /readyz verdict and its body.
func (h *health) ready() (bool, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.lastErr != "" && !h.synced:
		return false, "table not synced yet; last sync failed: " + h.lastErr
	case h.lastErr != "":
		return false, "last sync failed (the table of the last successful sync stays in force): " + h.lastErr
	case !h.synced:
		return false, "table not synced yet"
	}
	body := "ok"
	if h.quarantined > 0 {
		// Everything else is enforced; the held objects are named in
		// Events and in nftguard_quarantined_objects.
		body += fmt.Sprintf("; %d object(s) quarantined (the kernel refuses them)", h.quarantined)
	}
	if !h.peersStaleSince.IsZero() {
		// Still ready: the last records are enforced, which is the best
		// this node can do; the metric nftguard_peer_records_stale
		// alerts.
		body += "; peer records stale since " + h.peersStaleSince.UTC().Format(time.RFC3339) + ": controller lease not renewed"
	}
	return true, body
}
