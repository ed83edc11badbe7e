package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/nftguard/nftguard/compose"
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/explain"
	"github.com/nftguard/nftguard/manifest"
	"github.com/nftguard/nftguard/podset"
)

// runExplain judges one flow against the manifests with the explain
// package, an independent reading of NetworkPolicy and ClusterNetworkPolicy
// semantics (it does not look at nftables rules). A denied flow is a
// successful answer: exit 0.
func runExplain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	var files stringList
	var from, to, port, nodeName, kubeconfig string
	var live, nodeTable bool
	var netns string
	var family int
	fs.Var(&files, "f", "manifest file or directory (YAML or JSON, repeatable; - for stdin)")
	fs.StringVar(&kubeconfig, "kubeconfig", "", "judge against a live cluster (this kubeconfig) instead of manifests")
	fs.BoolVar(&live, "in-cluster", false, "judge against the live cluster of the in-cluster service account")
	fs.StringVar(&from, "from", "", "source: NAMESPACE/POD or an IP address")
	fs.StringVar(&to, "to", "", "destination: NAMESPACE/POD or an IP address")
	fs.StringVar(&port, "port", "", "destination port as PROTO/PORT, e.g. tcp/80")
	fs.StringVar(&nodeName, "node-name", "", "judge as this node's agent enforces (only its pods are isolated); default: every node enforces")
	fs.IntVar(&family, "family", 0, "4 or 6: the pods' address family for a pod-to-pod flow (default 4 when both pods have one)")
	fs.BoolVar(&nodeTable, "node-table", false, "read the live state of domainNames rules (the DNS answers the node's pods hold) from this machine's nftguard table; run it on the flow's node")
	fs.StringVar(&netns, "netns", "", "with --node-table: the network namespace the table is in (default: this process's)")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	switch {
	case len(files) == 0 && kubeconfig == "" && !live:
		return usagef("-f PATH, --kubeconfig FILE or --in-cluster is required")
	case netns != "" && !nodeTable:
		return usagef("--netns needs --node-table")
	case len(files) > 0 && (kubeconfig != "" || live):
		return usagef("-f and --kubeconfig/--in-cluster exclude each other")
	case from == "" || to == "" || port == "":
		return usagef("--from, --to and --port are required")
	case family != 0 && family != 4 && family != 6:
		return usagef("--family must be 4 or 6")
	}
	proto, num, err := explain.ParsePort(port)
	if err != nil {
		return usageError{err}
	}
	var objs *manifest.Objects
	if len(files) > 0 {
		if objs, _, err = readManifests(stdin, files, stderr); err != nil {
			return err
		}
	} else {
		if objs, err = liveObjects(ctx, kubeconfig); err != nil {
			return err
		}
		if objs.ClusterNetworkPolicies, err = liveClusterNetworkPolicies(ctx, kubeconfig, stderr); err != nil {
			return err
		}
	}
	cl, probs := explain.New(explain.Input{
		NodeName:               nodeName,
		Namespaces:             objs.Namespaces,
		Nodes:                  objs.Nodes,
		Pods:                   podset.FromAPIList(objs.Pods),
		NetworkPolicies:        objs.NetworkPolicies,
		ClusterNetworkPolicies: objs.ClusterNetworkPolicies,
	})
	for _, p := range probs {
		p.Source = objs.Source(p.Object)
		fmt.Fprintln(stderr, skippedLine(p))
	}
	for _, w := range cl.Warnings() {
		w.Source = objs.Source(w.Object)
		fmt.Fprintf(stderr, "warning: %v\n", w)
	}
	if nodeTable {
		answers, err := newTableAnswers(netns)
		if err != nil {
			return err
		}
		defer answers.close()
		cl.SetDomainAnswers(answers)
	}
	res, err := cl.Explain(explain.Flow{From: from, To: to, Protocol: proto, Port: num, Family: family})
	if errors.Is(err, explain.ErrBadInput) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, res)
	return nil
}

// cnpGroupVersions are the served versions of ClusterNetworkPolicy, the
// storage version first; their schemas are identical, so either decodes
// into v1beta1.
var cnpGroupVersions = []schema.GroupVersion{
	{Group: "policy.networking.k8s.io", Version: "v1beta1"},
	{Group: "policy.networking.k8s.io", Version: "v1alpha2"},
}

// liveClusterNetworkPolicies lists the cluster's ClusterNetworkPolicies
// when their CRD is served. Without it there are none, which stderr says:
// the verdict then rests on NetworkPolicy alone, as the agent's would.
func liveClusterNetworkPolicies(ctx context.Context, kubeconfig string, stderr io.Writer) ([]*cnpv1beta1.ClusterNetworkPolicy, error) {
	cfg, err := liveRESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	gv, err := servedCNPVersion(disc)
	if err != nil {
		return nil, err
	}
	if gv.Empty() {
		fmt.Fprintf(stderr, "note: the ClusterNetworkPolicy CRD (policy.networking.k8s.io) is not served: judging by NetworkPolicy alone\n")
		return nil, nil
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	list, err := dyn.Resource(gv.WithResource("clusternetworkpolicies")).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list clusternetworkpolicies.%s: %w", gv, err)
	}
	out := make([]*cnpv1beta1.ClusterNetworkPolicy, 0, len(list.Items))
	for i := range list.Items {
		cnp := &cnpv1beta1.ClusterNetworkPolicy{}
		// Fields this version does not know are dropped: a peer that
		// had only such a field arrives empty, and fails closed.
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(list.Items[i].Object, cnp); err != nil {
			return nil, fmt.Errorf("ClusterNetworkPolicy %s: %w", list.Items[i].GetName(), err)
		}
		out = append(out, cnp)
	}
	return out, nil
}

// servedCNPVersion returns the first served ClusterNetworkPolicy version,
// or the empty one when the CRD is not installed.
func servedCNPVersion(disc discovery.DiscoveryInterface) (schema.GroupVersion, error) {
	for _, gv := range cnpGroupVersions {
		res, err := disc.ServerResourcesForGroupVersion(gv.String())
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return schema.GroupVersion{}, fmt.Errorf("discover %s: %w", gv, err)
		}
		for _, r := range res.APIResources {
			if r.Name == "clusternetworkpolicies" {
				return gv, nil
			}
		}
	}
	return schema.GroupVersion{}, nil
}

// tableAnswers reads the domainNames sets of the node's table (each set
// once, on first use): the answers each pod holds, with the name each
// address was resolved for (the element's comment) and its time left.
type tableAnswers struct {
	eng  *engine.Engine
	sets map[string]map[string]engine.TimedState
}

func newTableAnswers(netns string) (*tableAnswers, error) {
	var opts []engine.Option
	if netns != "" {
		opts = append(opts, engine.WithNetNS(netns))
	}
	eng, err := engine.New(compose.Table(), opts...)
	if err != nil {
		return nil, fmt.Errorf("read the node's table: %w", err)
	}
	return &tableAnswers{eng: eng, sets: map[string]map[string]engine.TimedState{}}, nil
}

func (a *tableAnswers) close() { a.eng.Close() }

func (a *tableAnswers) Answer(set string, pod, dst netip.Addr) (string, time.Duration, bool) {
	m, ok := a.sets[set]
	if !ok {
		m = map[string]engine.TimedState{}
		// A set the table lacks holds nothing (no pod of this node is
		// a subject of its rule).
		typ := "ipv4_addr . ipv4_addr"
		if dst.Is6() {
			typ = "ipv6_addr . ipv6_addr"
		}
		if states, err := a.eng.ReadTimedAs(context.Background(), set, typ); err == nil {
			for _, s := range states {
				m[s.Key] = s
			}
		}
		a.sets[set] = m
	}
	s, ok := m[pod.String()+" . "+dst.String()]
	return s.Comment, s.Expires, ok
}
