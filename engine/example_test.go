package engine_test

import (
	"context"
	"fmt"
	"log"

	"github.com/nftguard/nftguard/engine"
)

// A Desired is plain data: chains with rules in nft syntax, and named sets.
// Render prints it as the nft script Sync would apply, touching nothing,
// so it runs anywhere.
func ExampleRender() {
	d := &engine.Desired{
		Sets: []engine.Set{{
			Name:     "allowed",
			Type:     "ipv4_addr",
			Interval: true,
			Elements: []engine.Element{{Key: "10.0.0.0/8"}, {Key: "192.0.2.1"}},
		}},
		Chains: []engine.Chain{{
			Name: "forward", Type: "filter", Hook: "forward", Priority: 0, Policy: "drop",
			Rules: []engine.Rule{
				{Rule: "ct state established,related accept"},
				{Rule: "ip daddr @allowed tcp dport 443 accept", Comment: "web"},
			},
		}},
	}
	text, err := engine.Render(engine.Table{Name: "example"}, d)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(text)
	// Output:
	// table inet example {
	// 	set allowed {
	// 		type ipv4_addr
	// 		flags interval
	// 		elements = {
	// 			10.0.0.0/8,
	// 			192.0.2.1 }
	// 	}
	// 	chain forward {
	// 		type filter hook forward priority 0; policy drop;
	// 		ct state established,related accept
	// 		ip daddr @allowed tcp dport 443 accept comment "web"
	// 	}
	// }
}

// A Fake keeps the table in memory and validates a Desired as Sync does:
// a unit test programs against engine.Interface and reads back what the
// code under test synced.
func ExampleNewFake() {
	fake, err := engine.NewFake(engine.Table{Name: "example"})
	if err != nil {
		log.Fatal(err)
	}
	var eng engine.Interface = fake // what the code under test is given
	d := &engine.Desired{Chains: []engine.Chain{{
		Name: "input", Type: "filter", Hook: "input", Policy: "accept",
		Rules: []engine.Rule{{Rule: "tcp dport 22 drop", Comment: "no ssh"}},
	}}}
	if _, err := eng.Sync(context.Background(), d); err != nil {
		log.Fatal(err)
	}
	// A rule nft cannot parse is refused before anything is stored.
	_, err = eng.Sync(context.Background(), &engine.Desired{Chains: []engine.Chain{{
		Name: "input", Rules: []engine.Rule{{Rule: "tcp dport twentytwo drop"}},
	}}})
	fmt.Println("refused:", err != nil)
	fmt.Println("syncs:", fake.Syncs())
	fmt.Print(fake.Dump())
	// Output:
	// refused: true
	// syncs: 1
	// table inet example {
	// 	chain input {
	// 		type filter hook input priority 0; policy accept;
	// 		tcp dport 22 drop comment "no ssh"
	// 	}
	// }
}

// New opens a netlink connection to the kernel for one table; each Sync
// makes the table equal the Desired in one atomic transaction, and Close
// releases the connection (the table stays). WithNetNS works inside a
// named network namespace instead of the caller's. This example needs
// CAP_NET_ADMIN and the namespace, so it is compiled but not run; in a
// fresh namespace it prints "operations: 3" (the table, the chain, the
// rule), then "operations: 0".
func ExampleNew() {
	eng, err := engine.New(engine.Table{Name: "example"}, engine.WithNetNS("/run/netns/example"))
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	d := &engine.Desired{Chains: []engine.Chain{{
		Name: "forward", Type: "filter", Hook: "forward", Policy: "accept",
		Rules: []engine.Rule{{Rule: "ct state invalid drop"}},
	}}}
	st, err := eng.Sync(context.Background(), d)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("operations:", st.Operations)
	// A second Sync of the same Desired finds nothing to change.
	if st, err = eng.Sync(context.Background(), d); err != nil {
		log.Fatal(err)
	}
	fmt.Println("operations:", st.Operations)
}
