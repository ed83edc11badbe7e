package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/testns"
)

// BenchmarkFullProgram programs N rules over 100 chains plus 100k set
// elements into a fresh namespace per iteration.
func BenchmarkFullProgram(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			want := bigTable(b, 100, n, 100000)
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				ns, err := testns.Create("engbench")
				if err != nil {
					b.Fatal(err)
				}
				e, err := New(Table{Name: "nftguard"}, WithNetNS(ns.Path))
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := e.syncK(context.Background(), want); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				e.Close()
				ns.Delete()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkOneChange changes one rule and one element in a 50k-rule,
// 100k-element table.
func BenchmarkOneChange(b *testing.B) {
	ns := testns.New(b, "engbench")
	e := newTestEngine(b, ns)
	ctx := context.Background()
	states := [2]*kTable{bigTable(b, 100, 50000, 100000), bigTable(b, 100, 50000, 100000)}
	c := states[1].chains["c050"]
	c.rules[10] = ruleDaddrDport(ip4(7777777), 1, expr.VerdictDrop)
	states[1].sets["allowed"].add(nftsyntaxElem(192, 0, 2, 1))
	states[1].prepare(unix.NFPROTO_INET)
	if _, err := e.syncK(ctx, states[0]); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st, err := e.syncK(ctx, states[(i+1)%2])
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(st.Messages), "msgs/op")
	}
}
