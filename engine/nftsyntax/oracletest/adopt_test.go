package oracletest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/testns"
)

// adoptRules are rules whose kernel dump carries attributes nft never
// sent (the log level the kernel defaults): the engine must still find
// that the kernel holds exactly its compile of the same text. The limit +
// log lines are what NFLOG logging of denied packets emits.
var adoptRules = []string{
	`log`,
	`log prefix "x " drop`,
	`log prefix "nftguard deny: " accept`,
	`log group 1`,
	`log group 100 drop`,
	`log prefix "abc" group 100`,
	`limit rate 10/second burst 20 packets log prefix "nftguard: denied " group 100`,
	`limit rate 10/second burst 20 packets log prefix "nftguard: denied " group 100 drop`,
	`limit rate 10/second burst 20 packets log prefix "denied " drop`,
	`limit rate 10/second burst 20 packets log group 100`,
	`ip saddr 10.0.0.1 limit rate 10/second burst 20 packets log prefix "deny " group 100 drop`,
}

func adoptDesired() *engine.Desired {
	d := &engine.Desired{}
	for i, r := range adoptRules {
		d.Chains = append(d.Chains, engine.Chain{Name: fmt.Sprintf("c%d", i), Rules: []engine.Rule{{Rule: r}}})
	}
	return d
}

// TestOracleAdoptNftRules: rules that `nft -f` loads from the same text
// as the engine's compile are, to a fresh engine, already in place (no
// message sent), and so are the engine's own rules read back by a fresh
// engine; nft lists them as the text they came from.
func TestOracleAdoptNftRules(t *testing.T) {
	ctx := context.Background()
	for _, who := range []string{"nft", "engine"} {
		t.Run(who, func(t *testing.T) {
			ns := testns.New(t, "adopt")
			d := adoptDesired()
			if who == "nft" {
				var b strings.Builder
				b.WriteString("table inet nftguard {\n")
				for i, r := range adoptRules {
					fmt.Fprintf(&b, "\tchain c%d {\n\t\t%s\n\t}\n", i, r)
				}
				b.WriteString("}\n")
				ns.MustExec(t, b.String(), "nft", "-f", "-")
			} else {
				first := newEngine(t, ns)
				if _, err := first.Sync(ctx, d); err != nil {
					t.Fatalf("engine sync: %v", err)
				}
			}
			listing := ns.MustExec(t, "", "nft", "list", "table", "inet", tableName)
			for _, r := range adoptRules {
				if !strings.Contains(listing, "\t"+r+"\n") {
					t.Errorf("nft does not list %q:\n%s", r, listing)
				}
			}
			st, err := newEngine(t, ns).Sync(ctx, d)
			if err != nil {
				t.Fatalf("fresh engine sync: %v", err)
			}
			if st.Messages != 0 {
				t.Errorf("a fresh engine rewrites %s's rules (%d messages); the kernel's copy should equal the compile of the same text\n%s",
					who, st.Messages, ns.MustExec(t, "", "nft", "--debug=netlink", "list", "table", "inet", tableName))
			}
		})
	}
}

func newEngine(t *testing.T, ns *testns.NS) *engine.Engine {
	t.Helper()
	e, err := engine.New(engine.Table{Name: tableName}, engine.WithNetNS(ns.Path))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}
