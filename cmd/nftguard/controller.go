package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"

	"github.com/nftguard/nftguard/controller"
)

// defaultControllerMetricsAddr listens on every address: the controller
// is a Deployment's pod, scraped over the pod network (the agent's
// default is loopback: it runs in the host's network).
const defaultControllerMetricsAddr = ":9744"

// runController is `nftguard controller`: flags in, controller.Run does
// the work.
func runController(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file (default: the in-cluster service account)")
	leaseNS := fs.String("lease-namespace", controller.DefaultLeaseNamespace, "namespace of the Lease the replicas elect their leader with")
	leaseName := fs.String("lease-name", controller.DefaultLeaseName, "name of the Lease the replicas elect their leader with")
	identity := fs.String("identity", "", "this replica's identity in the Lease (default: $POD_NAME, else the host name)")
	batchDelay := fs.Duration("batch-delay", controller.DefaultBatchDelay, "how long after the first change that dirtied a namespace its PeerSlices are written: later changes join that write; the bound on the delay batching adds")
	metricsAddr := fs.String("metrics-addr", defaultControllerMetricsAddr, `address for /metrics and /healthz ("0" disables)`)
	logFormat := fs.String("log-format", "text", "log format: text or json")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if *batchDelay <= 0 {
		return usagef("--batch-delay %v: want a positive duration", *batchDelay)
	}
	log, err := newLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		return usageError{err}
	}
	klog.SetSlogLogger(log)
	cfg, err := loadRESTConfig(*kubeconfig)
	if err != nil {
		return fmt.Errorf("API server configuration: %w", err)
	}
	// One replica writes for the whole cluster. Measured (e2e
	// TestControllerPublishRate: 2,000 pods in 140 slices, 200 record
	// changes a second spread over 20 namespaces, which took 60-110
	// writes a second): at 50 requests a second the client's limit was
	// the bottleneck (publish delay p50 <= 5 s, p99 <= 10 s); at 200,
	// bursts of 400, p50 <= 0.3-1 s, p99 <= 2-5 s on a loaded 2-core
	// machine that also ran the API server.
	cfg.QPS, cfg.Burst = 200, 400
	clients, err := controller.NewClients(cfg)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if *metricsAddr != "0" {
		ln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			return fmt.Errorf("listen for metrics on %s: %w", *metricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics server stopped", "err", err)
			}
		}()
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Shutdown(sctx)
		}()
		log.Info("serving health and metrics", "addr", ln.Addr().String())
	}
	return controller.Run(ctx, controller.Config{
		Clients:        clients,
		LeaseNamespace: *leaseNS,
		LeaseName:      *leaseName,
		Identity:       *identity,
		BatchDelay:     *batchDelay,
		Registerer:     reg,
		Logger:         log,
	})
}
