package netlab_test

import (
	"context"
	"fmt"
	"log"

	"github.com/nftguard/nftguard/internal/netlab"
)

// A demo or benchmark builds a lab with Create and must Close it; tests use
// netlab.New(t, spec), which closes it when the test ends.
func ExampleCreate() {
	lab, err := netlab.Create(netlab.Spec{
		Nodes:    []netlab.NodeSpec{{Name: "n1", Pods: []string{"x/a", "x/b", "y/a"}}},
		External: []string{"ext1"},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer lab.Close()

	// Program the node, e.g. `nftguard apply --netns PATH`.
	fmt.Println("node netns:", lab.Nodes[0].Path)

	tcp80 := netlab.Port{Proto: netlab.TCP, Num: 80}
	got, err := lab.Reachability(context.Background(), netlab.IPv4, tcp80)
	if err != nil {
		log.Fatal(err)
	}
	want := lab.NewExpected(netlab.IPv4, true, tcp80).ExpectTo("x/b", false).Expect("x/b", "x/b", true)
	if diff := netlab.Compare(want, got); diff != "" {
		fmt.Println(diff)
	}
}
