package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nftguard/nftguard/internal/cidrs"
	"github.com/nftguard/nftguard/problem"
)

// annotation returns the value of an egress annotation and its full name,
// preferring nftguard's prefix over kube-vip's.
func annotation(svc *corev1.Service, name string) (value, full string, ok bool) {
	for _, prefix := range []string{PrefixNftguard, PrefixKubeVIP} {
		if v, found := svc.Annotations[prefix+name]; found {
			return v, prefix + name, true
		}
	}
	return "", "", false
}

// readAnnotation sets *dst to what parse makes of the annotation name of
// svc, when svc has it; a value that does not parse is reported through
// bad, and *dst is what parse returned with its error (its zero value).
func readAnnotation[T any](svc *corev1.Service, name string, parse func(string) (T, error), bad func(ann, val, format string, args ...any), dst *T) {
	v, full, ok := annotation(svc, name)
	if !ok {
		return
	}
	x, err := parse(v)
	if err != nil {
		bad(full, v, "%v", err)
	}
	*dst = x
}

// parseBool reads a boolean annotation: false, with an error, unless it
// is a boolean strconv.ParseBool reads.
func parseBool(v string) (bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errors.New(`not a boolean (want "true" or "false")`)
	}
	return b, nil
}

// parseService reads a Service's egress annotations. It returns nil when the
// Service does not claim egress for its pods (no annotation, "false", not a
// LoadBalancer, no selector: the last two with a problem). A Service that
// claims egress but cannot be translated to (an invalid annotation or
// load-balancer address: problems; no address yet: a warning) is returned
// all the same, with no addresses: its pods are held, not left to the
// node's masquerade, unless it opts into node masquerade.
func parseService(svc *corev1.Service) (*egressService, []problem.Problem, []problem.Problem) {
	v, full, ok := annotation(svc, AnnEgress)
	if !ok {
		return nil, nil, nil
	}
	var probs []problem.Problem
	bad := func(ann, val, format string, args ...any) {
		probs = append(probs, problem.Problem{Object: serviceObject(svc), Field: annotationField(ann), Value: val, Reason: fmt.Sprintf(format, args...)})
	}
	on, err := parseBool(v)
	if err != nil {
		bad(full, v, "%v", err)
		return nil, probs, nil
	}
	if !on {
		return nil, nil, nil
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		probs = append(probs, problem.Problem{Object: serviceObject(svc),
			Reason: fmt.Sprintf("egress needs a Service of type LoadBalancer, this one is %q", svc.Spec.Type)})
		return nil, probs, nil
	}
	if len(svc.Spec.Selector) == 0 {
		probs = append(probs, problem.Problem{Object: serviceObject(svc),
			Reason: "egress needs a Service with a pod selector"})
		return nil, probs, nil
	}
	es := &egressService{svc: svc, key: svc.Namespace + "/" + svc.Name, selector: labels.SelectorFromSet(svc.Spec.Selector)}

	want6 := false
	readAnnotation(svc, AnnIPv6, parseBool, bad, &want6)
	// The families the Service claims: those it can have an address of
	// (spec.ipFamilies; both when unset, as in hand-written manifests),
	// IPv6 only when asked for.
	es.claim4, es.claim6 = len(svc.Spec.IPFamilies) == 0, want6 && len(svc.Spec.IPFamilies) == 0
	for _, f := range svc.Spec.IPFamilies {
		switch f {
		case corev1.IPv4Protocol:
			es.claim4 = true
		case corev1.IPv6Protocol:
			es.claim6 = want6
		}
	}
	// Read as "false" when it does not parse: an unreadable opt-out
	// holds the pods.
	readAnnotation(svc, AnnNodeMasquerade, parseBool, bad, &es.nodeMasq)
	readAnnotation(svc, AnnDstPorts, parsePorts, bad, &es.dst)
	readAnnotation(svc, AnnSrcPorts, parsePorts, bad, &es.src)
	readAnnotation(svc, AnnAllowedNets, parseNets, bad, &es.allowed)
	readAnnotation(svc, AnnDeniedNets, parseNets, bad, &es.denied)
	for i, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IP == "" {
			continue // hostname-only ingress: no address to translate to
		}
		a, why := ParseLoadBalancerIP(ing.IP)
		if why != "" {
			// Not "no address yet": the load balancer wrote something
			// the API server refuses, and that is what to fix.
			probs = append(probs, problem.Problem{Object: serviceObject(svc),
				Field: fmt.Sprintf("status.loadBalancer.ingress[%d].ip", i), Value: ing.IP,
				Reason: why})
			continue
		}
		if a.Is4() && !es.lb4.IsValid() {
			es.lb4 = a
		}
		if a.Is6() && want6 && !es.lb6.IsValid() {
			es.lb6 = a
		}
	}
	// An address of a family is a claim of it, whatever spec.ipFamilies
	// says (a LoadBalancer may give an IPv6 address to an IPv4 Service).
	es.claim4 = es.claim4 || es.lb4.IsValid()
	es.claim6 = es.claim6 || es.lb6.IsValid()
	if len(probs) > 0 {
		// Nothing of an invalid Service is programmed differently from
		// what was asked: no translation at all, its pods held.
		es.lb4, es.lb6, es.dst, es.src, es.allowed, es.denied = netip.Addr{}, netip.Addr{}, nil, nil, nil, nil
		es.invalid = true
		return es, probs, nil
	}
	if !es.lb4.IsValid() && !es.lb6.IsValid() {
		what := "held: their traffic that leaves the cluster is dropped until it has one"
		if es.nodeMasq {
			what = "left to the node's masquerade (" + AnnNodeMasquerade + ")"
		}
		return es, nil, []problem.Problem{{Object: serviceObject(svc),
			Reason: "no load-balancer address in status.loadBalancer.ingress yet: nothing is translated, the selected pods are " + what}}
	}
	return es, nil, nil
}

// ParseLoadBalancerIP reads a status.loadBalancer.ingress[].ip as strictly
// as the API server validates it since Kubernetes 1.33 (no leading zeros,
// no IPv4-mapped IPv6 address, no zone); why is "" when it is valid, and
// otherwise says what is wrong.
func ParseLoadBalancerIP(s string) (a netip.Addr, why string) {
	a, err := netip.ParseAddr(s) // refuses leading zeros in IPv4
	switch {
	case err != nil:
		return netip.Addr{}, "not an IP address"
	case a.Zone() != "":
		return netip.Addr{}, "an IP address with a zone"
	case a.Is4In6():
		return netip.Addr{}, "an IPv4-mapped IPv6 address (write the IPv4 address)"
	}
	return a, ""
}

// Bounds on what one annotation may ask for, after merging: each list
// becomes one anonymous set in a rule or one named set, and a tenant must not
// be able to make a single Service's part of the batch arbitrarily large.
const (
	maxPortItems = 512
	maxNetItems  = 1024
)

// parsePorts reads "tcp:443,udp:53,sctp:9000-9010". Repeated, overlapping
// and adjacent ranges of one protocol are merged (tcp:1-100,tcp:50-200 is
// tcp:1-200): the kernel refuses a set whose elements overlap or repeat,
// and the union is exactly what was asked for, so merging loses nothing.
// The result is sorted by protocol, then port.
func parsePorts(v string) ([]portMatch, error) {
	out, err := parsePortList(v)
	if err != nil {
		return nil, err
	}
	out = mergePorts(out)
	if len(out) > maxPortItems {
		return nil, fmt.Errorf("%d port ranges after merging; at most %d are allowed", len(out), maxPortItems)
	}
	return out, nil
}

// mergePorts sorts port ranges by protocol and start and joins those of one
// protocol that overlap or touch.
func mergePorts(ms []portMatch) []portMatch {
	sort.Slice(ms, func(i, j int) bool {
		if ms[i].proto != ms[j].proto {
			return ms[i].proto < ms[j].proto
		}
		return ms[i].lo < ms[j].lo
	})
	out := ms[:0]
	for _, m := range ms {
		if n := len(out); n > 0 && out[n-1].proto == m.proto && uint32(m.lo) <= uint32(out[n-1].hi)+1 {
			if m.hi > out[n-1].hi {
				out[n-1].hi = m.hi
			}
			continue
		}
		out = append(out, m)
	}
	return out
}

func parsePortList(v string) ([]portMatch, error) {
	var out []portMatch
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		proto, port, ok := strings.Cut(item, ":")
		if !ok {
			return nil, fmt.Errorf("%q is not PROTOCOL:PORT", item)
		}
		proto = strings.ToLower(strings.TrimSpace(proto))
		switch proto {
		case "tcp", "udp", "sctp":
		default:
			return nil, fmt.Errorf("%q: protocol must be tcp, udp or sctp", item)
		}
		loS, hiS, isRange := strings.Cut(strings.TrimSpace(port), "-")
		lo, err := strconv.ParseUint(loS, 10, 16)
		if err != nil || lo == 0 {
			return nil, fmt.Errorf("%q: port must be 1-65535", item)
		}
		hi := lo
		if isRange {
			hi, err = strconv.ParseUint(hiS, 10, 16)
			if err != nil || hi < lo {
				return nil, fmt.Errorf("%q: bad port range", item)
			}
		}
		out = append(out, portMatch{proto: proto, lo: uint16(lo), hi: uint16(hi)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no ports")
	}
	return out, nil
}

// parseNets reads "192.0.2.0/24,2001:db8::/32" (a bare address is a host).
func parseNets(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if !strings.Contains(item, "/") {
			a, err := netip.ParseAddr(item)
			if err != nil || a.Zone() != "" {
				return nil, fmt.Errorf("%q is not a CIDR or an address", item)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(item)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR: %v", item, err)
		}
		out = append(out, p.Masked())
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no networks")
	}
	// Repeated and nested networks are dropped here (cidrs.Fold), so
	// the bound counts what would reach the kernel.
	if n := len(cidrs.Fold(out)); n > maxNetItems {
		return nil, fmt.Errorf("%d networks; at most %d are allowed", n, maxNetItems)
	}
	return out, nil
}
