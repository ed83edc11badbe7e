package dnsfwd

import (
	"context"
	"time"

	"github.com/nftguard/nftguard/fqdn"
)

// The heartbeat keeps the redirect of the pods' DNS to the forwarder
// alive: the redirect rule looks up the query's protocol in a timeout
// set, and Heartbeat refreshes its elements every HeartbeatEvery with
// HeartbeatTTL while the forwarder serves. If the agent dies or hangs, the
// elements expire within HeartbeatTTL and the pods' queries go straight to
// the cluster DNS again: DNS fails open, while the domain rules' elements
// stop being added (their connections fail closed as the TTLs run out).
// Three periods tolerate two lost refreshes (a slow netlink batch under
// load) without flapping the redirect.
const (
	HeartbeatEvery = time.Second
	HeartbeatTTL   = 3 * time.Second
)

// Heartbeat waits until the listeners are up, then refreshes keys (e.g.
// "tcp" and "udp", as the engine writes keys of an inet_proto set) in
// set, while the table redirects (Table.Redirects), every HeartbeatEvery and whenever
// SetTable gives it one, until ctx is done or Run's context is. A failed
// refresh is logged and counted; the next one may succeed.
func (f *Forwarder) Heartbeat(ctx context.Context, set string, keys []string) {
	select {
	case <-f.ready:
	case <-f.done:
		return
	case <-ctx.Done():
		return
	}
	elems := make([]fqdn.Element, len(keys))
	for i, k := range keys {
		elems[i] = fqdn.Element{Set: set, Key: k, TTL: HeartbeatTTL}
	}
	tick := time.NewTicker(HeartbeatEvery)
	defer tick.Stop()
	for {
		select {
		case <-f.stopping:
			return
		default:
		}
		// A table without a redirect has no heartbeat set to keep.
		if f.table.Load().Redirects() {
			cctx, cancel := context.WithTimeout(ctx, HeartbeatEvery)
			err := f.cfg.Committer.AddTimed(cctx, elems)
			cancel()
			if err != nil && ctx.Err() == nil {
				f.m.HeartbeatErrors.Inc()
				f.warn("dns forwarder: heartbeat", "set", set, "error", err)
			}
		}
		select {
		case <-tick.C:
		case <-f.kick:
		case <-f.stopping:
			return
		case <-ctx.Done():
			return
		}
	}
}
