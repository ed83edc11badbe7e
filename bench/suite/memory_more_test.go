//go:build benchmemory

package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nftguard/nftguard/internal/kubetest"
	"github.com/nftguard/nftguard/internal/testns"
)

// moreAgents starts one fresh agent per memory limit listed in
// NFTGUARD_BENCH_MORE_AGENTS (comma-separated GOMEMLIMIT values, "none"
// for no limit), one after the other, against the cluster already made:
// creating a 150k-pod cluster takes 12–20 minutes, an agent's first sync
// seconds. Each is stopped before the next starts.
func moreAgents(ctx context.Context, t *testing.T, srv *kubetest.Server, rules, elems int) []agentRun {
	list := os.Getenv("NFTGUARD_BENCH_MORE_AGENTS")
	if list == "" {
		return nil
	}
	var out []agentRun
	for i, limit := range strings.Split(list, ",") {
		limit = strings.TrimSpace(limit)
		if limit == "none" {
			limit = ""
		}
		run := agentRun{GoMemLimit: limit}
		ns := testns.New(t, fmt.Sprintf("%s%dm%d", tagPrefix, os.Getpid(), i))
		ag := startAgentLimited(t, srv, ns.Path, limit)
		start := time.Now()
		if err := ag.waitTable(ctx, rules, elems); err != nil {
			t.Fatalf("agent with GOMEMLIMIT=%q: %v", limit, err)
		}
		run.FirstSyncSeconds = time.Since(start).Seconds()
		run.CachesSyncedSeconds = ag.cachesSynced()
		if m, err := ag.metrics(); err == nil {
			run.CompileSeconds = m["nftguard_compile_duration_seconds_sum"]
			for k, v := range m {
				if strings.HasPrefix(k, "nftguard_sync_duration_seconds_sum") {
					run.KernelSeconds += v
				}
			}
		}
		time.Sleep(2 * time.Second) // as for the first agent
		run.RSSAfterSyncKB, run.HWMAfterSyncKB = ag.rss(t)
		ag.cmd.Process.Kill()
		ag.cmd.Wait()
		t.Logf("agent with GOMEMLIMIT=%q: first table after %.1f s, RSS %d KiB (peak %d KiB)", limit, run.FirstSyncSeconds, run.RSSAfterSyncKB, run.HWMAfterSyncKB)
		out = append(out, run)
	}
	return out
}
