package engine

import (
	"context"
	"strings"
	"testing"
)

func TestFake(t *testing.T) {
	ctx := context.Background()
	f, err := NewFake(Table{Name: "nftguard"})
	if err != nil {
		t.Fatal(err)
	}
	d := textDesired(2)
	if _, err := f.Sync(ctx, d); err != nil {
		t.Fatal(err)
	}
	out := f.Dump()
	for _, s := range []string{"table inet nftguard {", "map pods {", "type ipv4_addr : verdict", "10.1.0.1 : jump pod-a", "type filter hook input priority 0; policy accept;", "ip saddr @allowed accept comment \"from allowed\""} {
		if !strings.Contains(out, s) {
			t.Errorf("dump lacks %q:\n%s", s, out)
		}
	}
	// Bad rules fail as with the engine, and leave the table as it was.
	for _, bad := range []string{"ip daddr @nope accept", "jump missing", "ip saddr 10.0.0.300 accept"} {
		d2 := textDesired(2)
		d2.Chains[5].Rules = append(d2.Chains[5].Rules, Rule{Rule: bad})
		_, err := f.Sync(ctx, d2)
		if err == nil || !strings.Contains(err.Error(), `chain "pod-a"`) || !strings.Contains(err.Error(), "rule 5") {
			t.Errorf("%q: error %v does not name the rule", bad, err)
		}
	}
	if f.Dump() != out {
		t.Error("failed sync changed the fake")
	}
	if err := f.Delete(ctx); err != nil || f.Dump() != "" {
		t.Fatalf("delete: %v", err)
	}
}
