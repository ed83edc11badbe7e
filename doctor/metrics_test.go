package doctor

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestCheckMetrics(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, tt := range []struct {
		name string
		body string
		code int
		sev  Severity
		want string
	}{
		{"fresh", fmt.Sprintf("%s %d\n", LastSyncMetric, now.Unix()-30), 200, Info, "last sync was 30s ago"},
		{"stale", fmt.Sprintf("%s %d\n", LastSyncMetric, now.Unix()-3600), 200, Warning, "last sync was 1h0m0s ago"},
		{"never synced", "go_goroutines 12\n", 200, Warning, "has not synced yet"},
		{"server error", "", 500, Warning, "HTTP 500"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tt.code)
				fmt.Fprint(w, tt.body)
			}))
			defer srv.Close()
			f := checkMetrics(context.Background(), srv.Client(), srv.URL, now)
			if f.Severity != tt.sev || !strings.Contains(f.Message, tt.want) {
				t.Errorf("got %v %q, want %v %q", f.Severity, f.Message, tt.sev, tt.want)
			}
		})
	}
	f := checkMetrics(context.Background(), http.DefaultClient, "http://127.0.0.1:1/metrics", now)
	if f.Severity != Warning || !strings.Contains(f.Message, "could not read") {
		t.Errorf("unreachable agent: %v", f)
	}
}

func TestReportWorst(t *testing.T) {
	r := &Report{}
	if r.Worst() != Info {
		t.Error("empty report is not info")
	}
	r.Findings = []Finding{{Severity: Info}, {Severity: Error}, {Severity: Warning}}
	if r.Worst() != Error || r.Count(Warning) != 1 {
		t.Errorf("worst %v, warnings %d", r.Worst(), r.Count(Warning))
	}
}
