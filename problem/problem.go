// Package problem describes an input object that nftguard left out, and
// why, in one shape for every producer (the manifest reader, the policy and
// egress compilers, explain) and every consumer (the CLI's `skipped:` lines,
// the agent's Events and metrics). A Problem names the object precisely
// enough to find it in a cluster or a file, so a consumer never has to guess
// an object's identity from an error string.
package problem

import (
	"strconv"
	"strings"
)

// Object identifies a Kubernetes object. Namespace is empty for
// cluster-scoped kinds (Namespace, Node) and for documents whose identity
// could not be read.
type Object struct {
	APIVersion string // e.g. "networking.k8s.io/v1"; empty when unknown
	Kind       string // e.g. "NetworkPolicy"; empty when unknown
	Namespace  string
	Name       string
}

// String is "KIND NAMESPACE/NAME", "KIND NAME" for cluster-scoped objects,
// or as much of that as is known.
func (o Object) String() string {
	id := o.Name
	if o.Namespace != "" {
		id = o.Namespace + "/" + o.Name
	}
	switch {
	case o.Kind == "":
		return id
	case id == "":
		return o.Kind
	}
	return o.Kind + " " + id
}

// Well-known API versions of the kinds nftguard reads.
const (
	CoreV1       = "v1"
	NetworkingV1 = "networking.k8s.io/v1"
	DiscoveryV1  = "discovery.k8s.io/v1"
)

// Problem is one reason an object (or a document that was meant to be one)
// is left out. Everything else is still used.
type Problem struct {
	Object
	// Field is the field path the reason is about, in the API's notation
	// (spec.ingress[0].from[1].ipBlock.cidr,
	// metadata.annotations[nftguard.io/egress]); empty for the whole object.
	Field string
	// Value is the offending value, when showing it helps (an annotation's
	// text). It is printed quoted and clipped: it is tenant input.
	Value  string
	Reason string
	// Source says where the object was read: "FILE:DOCUMENT" (1-based) for
	// manifests, empty for objects from the API server.
	Source string
	// Local is set when the problem depends on the compiling node's own
	// pods (two local pods claiming one address, for one): other nodes do
	// not find it, so the node that does must report it itself. A problem
	// about the object alone is found alike by every node.
	Local bool
}

// maxValue bounds how much of a tenant-controlled value reaches logs,
// stderr and Events.
const maxValue = 200

// Error is "[SOURCE: ]OBJECT[: FIELD[=VALUE]]: REASON".
func (p Problem) Error() string {
	var b strings.Builder
	if p.Source != "" {
		b.WriteString(p.Source)
		b.WriteString(": ")
	}
	if who := p.Object.String(); who != "" {
		b.WriteString(who)
		b.WriteString(": ")
	}
	if p.Field != "" {
		b.WriteString(p.Field)
		if p.Value != "" {
			b.WriteByte('=')
			b.WriteString(Quote(p.Value))
		}
		b.WriteString(": ")
	}
	b.WriteString(p.Reason)
	return b.String()
}

// Quote quotes tenant input for a message: Go syntax (so control characters
// and quotes cannot forge lines), clipped to a bounded length.
func Quote(s string) string {
	if len(s) > maxValue {
		// Cut on a rune boundary so the quoted text stays valid UTF-8.
		cut := maxValue
		for cut > 0 && !utf8Start(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "..."
	}
	return strconv.Quote(s)
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// Objects returns the distinct objects the problems are about, in first
// appearance order: what a "N objects skipped" count counts.
func Objects(ps []Problem) []Object {
	seen := make(map[Object]bool, len(ps))
	var out []Object
	for _, p := range ps {
		if seen[p.Object] {
			continue
		}
		seen[p.Object] = true
		out = append(out, p.Object)
	}
	return out
}
