package agent

import (
	"testing"

	"github.com/nftguard/nftguard/doctor"
)

// TestDoctorReadsOurLastSyncGauge keeps `nftguard doctor --metrics-url`
// and the agent agreeing on the gauge's name.
func TestDoctorReadsOurLastSyncGauge(t *testing.T) {
	m := newMetrics()
	m.lastSuccess.SetToCurrentTime()
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == doctor.LastSyncMetric {
			return
		}
	}
	t.Fatalf("the agent exports no %s, which doctor reads", doctor.LastSyncMetric)
}
