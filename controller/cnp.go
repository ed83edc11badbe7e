package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	cnpv1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
	cnpinformers "sigs.k8s.io/network-policy-api/pkg/client/informers/externalversions"
)

// cnpWatch watches ClusterNetworkPolicies while the API server serves them,
// as the agent decides (agent/cnp.go): discovery at start and every
// CNPCheckInterval; v1beta1 when served, else v1alpha2. Only their named
// ports matter here.
type cnpWatch struct {
	c *controller

	mu      sync.Mutex
	known   bool   // a discovery check gave a definite answer
	version string // "" when none is served
	inf     cache.SharedIndexInformer
	reg     cache.ResourceEventHandlerRegistration
	stop    context.CancelFunc
	lastErr string
}

const cnpKind = "ClusterNetworkPolicy"

func (w *cnpWatch) synced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.known && (w.version == "" || w.reg.HasSynced())
}

func (w *cnpWatch) run(ctx context.Context) {
	w.check(ctx)
	t := time.NewTicker(w.c.cfg.CNPCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			w.mu.Lock()
			if w.stop != nil {
				w.stop()
			}
			w.mu.Unlock()
			return
		case <-t.C:
			w.check(ctx)
		}
	}
}

// served is the version to watch, "" when none is served, or an error when
// discovery cannot tell.
func (w *cnpWatch) served() (string, error) {
	if w.c.cfg.CNP == nil {
		return "", nil
	}
	for _, v := range []string{cnpv1beta1.GroupVersion.Version, cnpv1alpha2.GroupVersion.Version} {
		gv := cnpv1beta1.GroupName + "/" + v
		list, err := w.c.cfg.Discovery.ServerResourcesForGroupVersion(gv)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("discover %s: %w", gv, err)
		}
		for _, r := range list.APIResources {
			if r.Name == "clusternetworkpolicies" {
				return v, nil
			}
		}
	}
	return "", nil
}

func (w *cnpWatch) check(ctx context.Context) {
	v, err := w.served()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if msg := err.Error(); msg != w.lastErr {
			w.lastErr = msg
			w.c.log.Warn("cannot tell whether ClusterNetworkPolicies are served; keeping the current state", "err", err)
		}
		return
	}
	w.lastErr = ""
	if w.known && v == w.version {
		return
	}
	w.known = true
	if w.inf != nil {
		// Their port names stop counting.
		for _, o := range w.inf.GetStore().List() {
			if p, ok := o.(*policyObj); ok {
				w.c.onPolicy(policyKey(cnpKind, p.Namespace, p.Name), nil)
			}
		}
		w.stop()
		w.inf, w.reg, w.stop = nil, nil, nil
	}
	w.version = v
	if v == "" {
		w.c.log.Info("ClusterNetworkPolicies not served: only NetworkPolicies' named ports are published")
		return
	}
	w.c.log.Info("watching ClusterNetworkPolicies for their named ports", "version", v)
	f := cnpinformers.NewSharedInformerFactoryWithOptions(w.c.cfg.CNP, 0, cnpinformers.WithTransform(transform))
	if v == cnpv1beta1.GroupVersion.Version {
		w.inf = f.Policy().V1beta1().ClusterNetworkPolicies().Informer()
	} else {
		w.inf = f.Policy().V1alpha2().ClusterNetworkPolicies().Informer()
	}
	// Errors cannot happen before the informer starts.
	w.reg, _ = w.inf.AddEventHandler(policyHandler(w.c, cnpKind))
	ictx, cancel := context.WithCancel(ctx)
	w.stop = cancel
	f.Start(ictx.Done())
	go func() {
		<-ictx.Done()
		f.Shutdown()
	}()
}
