package problem

import (
	"strings"
	"testing"
)

func TestError(t *testing.T) {
	np := Object{APIVersion: NetworkingV1, Kind: "NetworkPolicy", Namespace: "x", Name: "deny"}
	for _, tc := range []struct {
		p    Problem
		want string
	}{
		{Problem{Object: np, Field: "spec.ingress[0].from[1].ipBlock.cidr", Reason: "invalid CIDR"},
			`NetworkPolicy x/deny: spec.ingress[0].from[1].ipBlock.cidr: invalid CIDR`},
		{Problem{Object: Object{Kind: "Service", Namespace: "a", Name: "b"}, Field: "metadata.annotations[nftguard.io/egress]", Value: "yes", Reason: `must be "true"`},
			`Service a/b: metadata.annotations[nftguard.io/egress]="yes": must be "true"`},
		{Problem{Object: Object{Kind: "Node", Name: "n1"}, Reason: "bad"}, `Node n1: bad`},
		{Problem{Source: "p.yaml:3", Reason: "not valid YAML"}, `p.yaml:3: not valid YAML`},
		{Problem{Source: "p.yaml:3", Object: np, Reason: "r"}, `p.yaml:3: NetworkPolicy x/deny: r`},
		{Problem{Object: Object{Kind: "Pod"}, Reason: "r"}, `Pod: r`},
	} {
		if got := tc.p.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

func TestQuoteIsOneBoundedLine(t *testing.T) {
	hostile := "a\"\n" + strings.Repeat("ü", 500) + "\x00"
	q := Quote(hostile)
	if strings.ContainsAny(q, "\n\x00") {
		t.Fatalf("quoted value carries a raw control character: %q", q)
	}
	if len(q) > maxValue+10 {
		t.Fatalf("quoted value is %d bytes, want at most ~%d", len(q), maxValue)
	}
	if !strings.HasSuffix(q, "...") {
		t.Fatalf("clipped value does not say so: %q", q)
	}
}

func TestObjectsCountsEachObjectOnce(t *testing.T) {
	a := Object{Kind: "NetworkPolicy", Namespace: "x", Name: "a"}
	b := Object{Kind: "Service", Namespace: "x", Name: "a"}
	got := Objects([]Problem{{Object: a, Field: "f1"}, {Object: b}, {Object: a, Field: "f2"}})
	if len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("Objects = %v, want [%v %v]", got, a, b)
	}
}
