package controller

import "github.com/prometheus/client_golang/prometheus"

// metrics are the controller's, all named nftguard_controller_*
// (Namespace and Subsystem make the prefix; docs/operations.md's
// Controller table lists them, see TestMetricsDocumented).
type metrics struct {
	leader      prometheus.Gauge
	writes      *prometheus.CounterVec
	writeErrors *prometheus.CounterVec
	records     prometheus.Gauge
	slices      prometheus.Gauge
	dirty       prometheus.Gauge
	delay       prometheus.Histogram
	portNames   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "nftguard", Subsystem: "controller", Name: "leader",
			Help: "1 while this controller holds the Lease and writes PeerSlices, 0 otherwise.",
		}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nftguard", Subsystem: "controller", Name: "writes_total",
			Help: "PeerSlice writes that succeeded, by op (create, update, delete).",
		}, []string{"op"}),
		writeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "nftguard", Subsystem: "controller", Name: "write_errors_total",
			Help: "PeerSlice writes that failed, by op (create, update, delete); conflicts included (the namespace is planned again).",
		}, []string{"op"}),
		records: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "nftguard", Subsystem: "controller", Name: "records",
			Help: "Pod records in the desired state (published pods of the cluster).",
		}),
		slices: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "nftguard", Subsystem: "controller", Name: "slices",
			Help: "PeerSlices in the controller's cache.",
		}),
		dirty: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "nftguard", Subsystem: "controller", Name: "dirty_namespaces",
			Help: "Namespaces whose slices wait to be written.",
		}),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "nftguard", Subsystem: "controller", Name: "publish_delay_seconds",
			Help:    "From the first change that dirtied a namespace to the end of the writes that published it.",
			Buckets: []float64{0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 2, 5, 10, 30},
		}),
		portNames: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "nftguard", Subsystem: "controller", Name: "referenced_port_names",
			Help: "Port names some NetworkPolicy or ClusterNetworkPolicy refers to: the named ports records keep.",
		}),
	}
	for _, op := range []string{"create", "update", "delete"} {
		m.writes.WithLabelValues(op)
		m.writeErrors.WithLabelValues(op)
	}
	for _, c := range []prometheus.Collector{m.leader, m.writes, m.writeErrors, m.records, m.slices, m.dirty, m.delay, m.portNames} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
