package doctor

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// LastSyncMetric is the gauge a live agent exports: the Unix time of its
// last successful sync.
const LastSyncMetric = "nftguard_last_sync_success_timestamp_seconds"

// staleSync is the age beyond which a live agent's last sync is suspect:
// the agent resyncs on every change and periodically.
const staleSync = 10 * time.Minute

func checkMetrics(ctx context.Context, client *http.Client, url string, now time.Time) Finding {
	f := Finding{Check: "nftguard", Severity: Warning}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		f.Message = "metrics URL: " + err.Error()
		return f
	}
	resp, err := client.Do(req)
	if err != nil {
		f.Message = "could not read the agent's metrics: " + err.Error()
		f.Advice = "check that the agent runs and serves metrics at " + url
		return f
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		f.Message = fmt.Sprintf("agent metrics at %s: HTTP %s", url, resp.Status)
		return f
	}
	ts, ok, err := lastSync(resp.Body)
	switch {
	case err != nil:
		f.Message = "read the agent's metrics: " + err.Error()
	case !ok:
		f.Message = fmt.Sprintf("the agent's metrics have no %s: it has not synced yet", LastSyncMetric)
	default:
		age := now.Sub(ts).Round(time.Second)
		f.Message = fmt.Sprintf("the agent's last sync was %v ago", age)
		if age <= staleSync {
			f.Severity = Info
		} else {
			f.Advice = "check the agent's logs: it has not synced for a while"
		}
	}
	return f
}

// lastSync finds the last-sync gauge in Prometheus text exposition format.
func lastSync(r io.Reader) (time.Time, bool, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, LastSyncMetric) {
			continue
		}
		rest := line[len(LastSyncMetric):]
		if strings.HasPrefix(rest, "{") {
			i := strings.Index(rest, "}")
			if i < 0 {
				continue
			}
			rest = rest[i+1:]
		} else if !strings.HasPrefix(rest, " ") {
			continue // another metric whose name starts the same
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil || math.IsNaN(v) || v <= 0 {
			return time.Time{}, false, fmt.Errorf("bad value %q for %s", fields[0], LastSyncMetric)
		}
		sec, frac := math.Modf(v)
		return time.Unix(int64(sec), int64(frac*1e9)), true, nil
	}
	return time.Time{}, false, sc.Err()
}
