package cnpconformance

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/nftguard/nftguard/internal/netlab"
)

// suiteNamespacePrefix marks the namespaces the upstream suite creates; the
// harness's controllers act only there.
const suiteNamespacePrefix = "network-policy-conformance-"

// kubelet plays the parts of a cluster the test API server lacks, for the
// suite's namespaces only: a StatefulSet controller (pods <set>-0..N-1 from
// the template, status counts, scale-down, pods of deleted sets removed as
// the garbage collector would), a scheduler (spec.nodeName round-robin by
// ordinal), the kubelets (a lab pod namespace per pod, or servers in the
// node's namespace for host-network pods; pod status with addresses and
// the Ready condition; graceful deletion completed) and the namespace
// controller (contents of a terminating namespace deleted, then the
// namespace finalized). It reconciles the whole state on every event and
// every half second: a handful of objects, so level-triggered and simple.
type kubelet struct {
	cs        kubernetes.Interface
	rt        *netlab.Runtime
	podNodes  []string // nodes for ordinary pods
	hostNodes []string // nodes for host-network pods (see placement)
	log       *log.Logger

	factory informers.SharedInformerFactory
	pods    corelisters.PodLister
	sets    appslisters.StatefulSetLister
	nss     corelisters.NamespaceLister
	poke    chan struct{}

	mu       sync.Mutex
	attached map[string]*attachment // by "namespace/name"
	errCount int
	lastErr  string
}

// attachment is a pod's presence in the lab.
type attachment struct {
	uid  types.UID
	ep   *netlab.Endpoint
	host bool
}

func newKubelet(cs kubernetes.Interface, rt *netlab.Runtime, podNodes, hostNodes []string, logger *log.Logger) *kubelet {
	k := &kubelet{cs: cs, rt: rt, podNodes: podNodes, hostNodes: hostNodes, log: logger,
		poke: make(chan struct{}, 1), attached: map[string]*attachment{}}
	k.factory = informers.NewSharedInformerFactory(cs, 0)
	h := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { k.wake() },
		UpdateFunc: func(any, any) { k.wake() },
		DeleteFunc: func(any) { k.wake() },
	}
	for _, inf := range []cache.SharedIndexInformer{
		k.factory.Core().V1().Pods().Informer(),
		k.factory.Apps().V1().StatefulSets().Informer(),
		k.factory.Core().V1().Namespaces().Informer(),
	} {
		inf.AddEventHandler(h)
	}
	k.pods = k.factory.Core().V1().Pods().Lister()
	k.sets = k.factory.Apps().V1().StatefulSets().Lister()
	k.nss = k.factory.Core().V1().Namespaces().Lister()
	return k
}

func (k *kubelet) wake() {
	select {
	case k.poke <- struct{}{}:
	default:
	}
}

// run reconciles until ctx ends, then detaches every pod.
func (k *kubelet) run(ctx context.Context) {
	k.factory.Start(ctx.Done())
	k.factory.WaitForCacheSync(ctx.Done())
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		k.reconcile(ctx)
		select {
		case <-ctx.Done():
			k.factory.Shutdown()
			k.detachAll()
			return
		case <-k.poke:
		case <-tick.C:
		}
	}
}

func (k *kubelet) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	k.log.Print("error: " + msg)
	k.mu.Lock()
	k.errCount++
	k.lastErr = msg
	k.mu.Unlock()
}

func (k *kubelet) reconcile(ctx context.Context) {
	nss, _ := k.nss.List(labels.Everything())
	for _, ns := range nss {
		if strings.HasPrefix(ns.Name, suiteNamespacePrefix) && ns.DeletionTimestamp != nil {
			k.finalizeNamespace(ctx, ns)
		}
	}
	sets, _ := k.sets.List(labels.Everything())
	for _, s := range sets {
		if strings.HasPrefix(s.Namespace, suiteNamespacePrefix) && s.DeletionTimestamp == nil {
			k.syncStatefulSet(ctx, s)
		}
	}
	pods, _ := k.pods.List(labels.Everything())
	live := map[string]bool{}
	for _, p := range pods {
		if !strings.HasPrefix(p.Namespace, suiteNamespacePrefix) {
			continue
		}
		live[p.Namespace+"/"+p.Name] = true
		k.syncPod(ctx, p, sets)
	}
	// Pods gone from the API (deleted with no grace period): stop them.
	k.mu.Lock()
	var gone []string
	for key := range k.attached {
		if !live[key] {
			gone = append(gone, key)
		}
	}
	k.mu.Unlock()
	for _, key := range gone {
		k.detach(key)
	}
	// Status last: it counts what the pod pass made ready.
	for _, s := range sets {
		if strings.HasPrefix(s.Namespace, suiteNamespacePrefix) && s.DeletionTimestamp == nil {
			k.syncStatefulSetStatus(ctx, s)
		}
	}
}

// ordinalOf returns i for a pod named <set>-i.
func ordinalOf(set, pod string) (int, bool) {
	rest, ok := strings.CutPrefix(pod, set+"-")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	return i, err == nil && i >= 0 && strconv.Itoa(i) == rest
}

func ownedBy(p *corev1.Pod, uid types.UID) bool {
	for _, o := range p.OwnerReferences {
		if o.UID == uid {
			return true
		}
	}
	return false
}

func (k *kubelet) syncStatefulSet(ctx context.Context, s *appsv1.StatefulSet) {
	replicas := 1
	if s.Spec.Replicas != nil {
		replicas = int(*s.Spec.Replicas)
	}
	for i := range replicas {
		name := fmt.Sprintf("%s-%d", s.Name, i)
		if _, err := k.pods.Pods(s.Namespace).Get(name); err == nil {
			continue
		}
		k.createPod(ctx, s, i)
	}
	pods, _ := k.pods.Pods(s.Namespace).List(labels.Everything())
	for _, p := range pods {
		if i, ok := ordinalOf(s.Name, p.Name); ok && i >= replicas && ownedBy(p, s.UID) && p.DeletionTimestamp == nil {
			k.deletePod(ctx, p, nil) // scale down: graceful, as the controller does
		}
	}
}

func (k *kubelet) createPod(ctx context.Context, s *appsv1.StatefulSet, i int) {
	name := fmt.Sprintf("%s-%d", s.Name, i)
	tmpl := s.Spec.Template.DeepCopy()
	lbls := map[string]string{}
	for key, v := range tmpl.Labels {
		lbls[key] = v
	}
	lbls["statefulset.kubernetes.io/pod-name"] = name
	lbls["apps.kubernetes.io/pod-index"] = strconv.Itoa(i)
	spec := tmpl.Spec
	nodes := k.podNodes
	if spec.HostNetwork {
		nodes = k.hostNodes
	}
	spec.NodeName = nodes[i%len(nodes)]
	spec.Hostname = name
	yes := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: s.Namespace, Labels: lbls, Annotations: tmpl.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet",
				Name: s.Name, UID: s.UID, Controller: &yes, BlockOwnerDeletion: &yes}},
		},
		Spec: spec,
	}
	if _, err := k.cs.CoreV1().Pods(s.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		if !apierrors.IsAlreadyExists(err) { // else: created already, the informer lags
			k.fail("create pod %s/%s: %v", s.Namespace, name, err)
		}
		return
	}
	k.log.Printf("statefulset %s/%s: created pod %s on %s", s.Namespace, s.Name, name, spec.NodeName)
}

func (k *kubelet) syncStatefulSetStatus(ctx context.Context, s *appsv1.StatefulSet) {
	replicas := int32(1)
	if s.Spec.Replicas != nil {
		replicas = *s.Spec.Replicas
	}
	var current, ready int32
	pods, _ := k.pods.Pods(s.Namespace).List(labels.Everything())
	for _, p := range pods {
		i, ok := ordinalOf(s.Name, p.Name)
		if !ok || int32(i) >= replicas || !ownedBy(p, s.UID) || p.DeletionTimestamp != nil {
			continue
		}
		current++
		if podReady(p) {
			ready++
		}
	}
	st := appsv1.StatefulSetStatus{
		ObservedGeneration: s.Generation,
		Replicas:           current, CurrentReplicas: current, UpdatedReplicas: current,
		ReadyReplicas: ready, AvailableReplicas: ready,
		CurrentRevision: s.Status.CurrentRevision, UpdateRevision: s.Status.UpdateRevision,
		CollisionCount: s.Status.CollisionCount,
	}
	if st.ObservedGeneration == s.Status.ObservedGeneration && st.Replicas == s.Status.Replicas &&
		st.ReadyReplicas == s.Status.ReadyReplicas && st.AvailableReplicas == s.Status.AvailableReplicas &&
		st.CurrentReplicas == s.Status.CurrentReplicas && st.UpdatedReplicas == s.Status.UpdatedReplicas {
		return
	}
	upd := s.DeepCopy()
	upd.Status = st
	if _, err := k.cs.AppsV1().StatefulSets(s.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			k.fail("status of statefulset %s/%s: %v", s.Namespace, s.Name, err)
		}
		return
	}
	k.log.Printf("statefulset %s/%s: %d/%d ready", s.Namespace, s.Name, ready, replicas)
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (k *kubelet) knownNode(n string) bool {
	return slices.Contains(k.podNodes, n) || slices.Contains(k.hostNodes, n)
}

func (k *kubelet) syncPod(ctx context.Context, p *corev1.Pod, sets []*appsv1.StatefulSet) {
	key := p.Namespace + "/" + p.Name
	if p.DeletionTimestamp != nil {
		// The kubelet's half of a graceful deletion: stop, then confirm.
		k.detach(key)
		k.deletePod(ctx, p, ptrTo(int64(0)))
		return
	}
	// The garbage collector's part: a pod whose StatefulSet is gone.
	if ref := metav1.GetControllerOf(p); ref != nil && ref.Kind == "StatefulSet" {
		found := slices.ContainsFunc(sets, func(s *appsv1.StatefulSet) bool { return s.UID == ref.UID })
		if !found {
			if _, err := k.cs.AppsV1().StatefulSets(p.Namespace).Get(ctx, ref.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				k.deletePod(ctx, p, nil)
				return
			}
		}
	}
	if !k.knownNode(p.Spec.NodeName) {
		return
	}
	k.mu.Lock()
	a := k.attached[key]
	k.mu.Unlock()
	if a != nil && a.uid != p.UID {
		k.detach(key) // a new pod of the same name
		a = nil
	}
	if a == nil {
		ports := servedPorts(&p.Spec)
		var ep *netlab.Endpoint
		var err error
		if p.Spec.HostNetwork {
			ep, err = k.rt.ServeNode(p.Spec.NodeName, ports)
		} else {
			ep, err = k.rt.AddPod(p.Spec.NodeName, key, ports)
		}
		if err != nil {
			k.fail("start pod %s on %s: %v", key, p.Spec.NodeName, err)
			return
		}
		a = &attachment{uid: p.UID, ep: ep, host: p.Spec.HostNetwork}
		k.mu.Lock()
		k.attached[key] = a
		k.mu.Unlock()
		k.log.Printf("pod %s: started on %s at %v/%v serving %v", key, p.Spec.NodeName, ep.IPv4, ep.IPv6, ports)
	}
	k.syncPodStatus(ctx, p, a)
}

func (k *kubelet) syncPodStatus(ctx context.Context, p *corev1.Pod, a *attachment) {
	ep := a.ep
	ip4, ip6 := ep.IPv4.String(), ep.IPv6.String()
	node := ep.Node
	if p.Status.Phase == corev1.PodRunning && p.Status.PodIP == ip4 && podReady(p) && p.Status.HostIP == node.IPv4.String() {
		return
	}
	upd := p.DeepCopy()
	now := metav1.Now()
	upd.Status.Phase = corev1.PodRunning
	upd.Status.HostIP = node.IPv4.String()
	upd.Status.HostIPs = []corev1.HostIP{{IP: node.IPv4.String()}, {IP: node.IPv6.String()}}
	upd.Status.PodIP = ip4
	upd.Status.PodIPs = []corev1.PodIP{{IP: ip4}, {IP: ip6}}
	upd.Status.StartTime = &now
	upd.Status.Conditions = nil
	for _, c := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		upd.Status.Conditions = append(upd.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	upd.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		upd.Status.ContainerStatuses = append(upd.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: ptrTo(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	if _, err := k.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			k.fail("status of pod %s/%s: %v", p.Namespace, p.Name, err)
		}
		return
	}
	k.log.Printf("pod %s/%s: running and ready at %s", p.Namespace, p.Name, ip4)
}

func ptrTo[T any](v T) *T { return &v }

// deletePod deletes p (this incarnation only); grace nil is the pod's own.
func (k *kubelet) deletePod(ctx context.Context, p *corev1.Pod, grace *int64) {
	err := k.cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{
		GracePeriodSeconds: grace, Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		k.fail("delete pod %s/%s: %v", p.Namespace, p.Name, err)
	}
}

func (k *kubelet) detach(key string) {
	k.mu.Lock()
	a := k.attached[key]
	delete(k.attached, key)
	k.mu.Unlock()
	if a == nil {
		return
	}
	if a.host {
		k.rt.StopNode(a.ep)
	} else if err := k.rt.RemovePod(a.ep); err != nil {
		k.fail("stop pod %s: %v", key, err)
	}
	k.log.Printf("pod %s: stopped", key)
}

func (k *kubelet) detachAll() {
	k.mu.Lock()
	var keys []string
	for key := range k.attached {
		keys = append(keys, key)
	}
	k.mu.Unlock()
	for _, key := range keys {
		k.detach(key)
	}
}

// finalizeNamespace does the namespace controller's work for a terminating
// namespace: delete what the suite put there, and once no pod is left,
// remove the "kubernetes" finalizer so the namespace goes away.
func (k *kubelet) finalizeNamespace(ctx context.Context, ns *corev1.Namespace) {
	if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		return
	}
	now := ptrTo(int64(0))
	all := metav1.ListOptions{}
	errs := []error{
		k.cs.AppsV1().StatefulSets(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{}, all),
		k.cs.NetworkingV1().NetworkPolicies(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{}, all),
		k.cs.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: now}, all),
	}
	for _, err := range errs {
		if err != nil && !apierrors.IsNotFound(err) {
			k.fail("empty namespace %s: %v", ns.Name, err)
			return
		}
	}
	if pods, _ := k.pods.Pods(ns.Name).List(labels.Everything()); len(pods) > 0 {
		return // next round, once the informer saw them go
	}
	k.mu.Lock()
	for key := range k.attached {
		if strings.HasPrefix(key, ns.Name+"/") {
			k.mu.Unlock()
			return
		}
	}
	k.mu.Unlock()
	upd := ns.DeepCopy()
	upd.Spec.Finalizers = slices.DeleteFunc(upd.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
	if _, err := k.cs.CoreV1().Namespaces().Finalize(ctx, upd, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		k.fail("finalize namespace %s: %v", ns.Name, err)
		return
	}
	k.log.Printf("namespace %s: finalized", ns.Name)
}

// lookup returns a running pod's attachment for the exec bridge.
func (k *kubelet) lookup(ns, name string) (*corev1.Pod, *attachment, error) {
	p, err := k.pods.Pods(ns).Get(name)
	if err != nil {
		return nil, nil, fmt.Errorf("pod %s/%s: %w", ns, name, err)
	}
	k.mu.Lock()
	a := k.attached[ns+"/"+name]
	k.mu.Unlock()
	if a == nil || a.uid != p.UID || p.DeletionTimestamp != nil {
		return nil, nil, fmt.Errorf("pod %s/%s is not running", ns, name)
	}
	return p, a, nil
}

// endpointAt returns the lab endpoint serving addr, or nil: a pod's own
// namespace, or for a node address the node's host-network servers.
func (k *kubelet) endpointAt(addr netip.Addr) *netlab.Endpoint {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, a := range k.attached {
		if a.ep.IPv4 == addr || a.ep.IPv6 == addr {
			return a.ep
		}
	}
	return nil
}

// errors returns how many reconcile steps failed, and the last failure.
func (k *kubelet) errors() (int, string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.errCount, k.lastErr
}
