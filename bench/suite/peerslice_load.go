package main

import (
	"bufio"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
)

// The PeerSlice load measurement (peerslice_load_test.go) reads the API
// server's own metrics as the ground truth of what it sent; these are the
// pure parts: the text exposition parsed, the samples summed, the
// NetworkPolicies' named ports, percentiles.

// metricSample is one line of the Prometheus text exposition.
type metricSample struct {
	name   string
	labels map[string]string
	value  float64
}

// parseMetrics reads the text exposition format (comments skipped). A line
// it cannot read is an error: a silently skipped metricSample would be a wrong
// ground truth.
func parseMetrics(text string) ([]metricSample, error) {
	var out []metricSample
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d %q: %w", n, line, err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parseSample(line string) (metricSample, error) {
	s := metricSample{labels: map[string]string{}}
	rest := line
	if i := strings.IndexAny(line, "{ "); i < 0 {
		return s, fmt.Errorf("no value")
	} else {
		s.name, rest = line[:i], line[i:]
	}
	if strings.HasPrefix(rest, "{") {
		rest = rest[1:]
		for {
			rest = strings.TrimLeft(rest, " ,")
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.IndexByte(rest, '=')
			if eq < 0 || len(rest) < eq+2 || rest[eq+1] != '"' {
				return s, fmt.Errorf("bad label")
			}
			key := rest[:eq]
			rest = rest[eq+2:]
			var v strings.Builder
			closed := false
			for i := 0; i < len(rest); i++ {
				c := rest[i]
				if c == '\\' && i+1 < len(rest) {
					i++
					switch rest[i] {
					case 'n':
						v.WriteByte('\n')
					default:
						v.WriteByte(rest[i])
					}
					continue
				}
				if c == '"' {
					rest, closed = rest[i+1:], true
					break
				}
				v.WriteByte(c)
			}
			if !closed {
				return s, fmt.Errorf("unterminated label value")
			}
			s.labels[key] = v.String()
		}
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return s, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return s, fmt.Errorf("value: %w", err)
	}
	s.value = v
	return s, nil
}

// sumOf adds the samples of a metric whose labels include all of match.
func sumOf(ss []metricSample, name string, match map[string]string) float64 {
	var n float64
	for _, s := range ss {
		if s.name != name {
			continue
		}
		ok := true
		for k, v := range match {
			if s.labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			n += s.value
		}
	}
	return n
}

// referencedPorts are the port names some NetworkPolicy refers to, in its
// ingress or egress rules: the named ports a record keeps.
func referencedPorts(nps []*networkingv1.NetworkPolicy) map[string]bool {
	out := map[string]bool{}
	add := func(ports []networkingv1.NetworkPolicyPort) {
		for _, p := range ports {
			if p.Port != nil && p.Port.StrVal != "" {
				out[p.Port.StrVal] = true
			}
		}
	}
	for _, np := range nps {
		for _, r := range np.Spec.Ingress {
			add(r.Ports)
		}
		for _, r := range np.Spec.Egress {
			add(r.Ports)
		}
	}
	return out
}

// quantile is the q-quantile (nearest rank) of ds; 0 for none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}
