package engine

import (
	"context"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftwire"
	"github.com/nftguard/nftguard/internal/kerneltest"
	"github.com/nftguard/nftguard/internal/testns"
)

// BenchmarkFullProgram programs N rules over 100 chains plus 100k set
// elements into a fresh namespace per iteration.
func BenchmarkFullProgram(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			kerneltest.Require(b) // testns.Create does not check it
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
				if _, err := e.syncTable(context.Background(), want); err != nil {
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
	states := [2]*kernelTable{bigTable(b, 100, 50000, 100000), bigTable(b, 100, 50000, 100000)}
	c := states[1].chains["c050"]
	c.rules[10] = ruleDaddrDport(ip4(7777777), 1, nftwire.VerdictDrop)
	states[1].sets["allowed"].add(nftsyntaxElem(192, 0, 2, 1))
	states[1].prepare(unix.NFPROTO_INET)
	if _, err := e.syncTable(ctx, states[0]); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st, err := e.syncTable(ctx, states[(i+1)%2])
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(st.Messages), "msgs/op")
	}
}

// bigDesired is bigTable as the caller writes it: text rules and elements,
// so Sync's compile step is part of what is measured.
func bigDesired(nChains, nRules, nElems int) *Desired {
	d := &Desired{}
	base := Chain{Name: "input", Type: "filter", Hook: "input", Rules: []Rule{{Rule: "ip saddr @allowed accept"}}}
	var chains []Chain
	for c := 0; c < nChains; c++ {
		name := fmt.Sprintf("c%03d", c)
		base.Rules = append(base.Rules, Rule{Rule: "jump " + name})
		chains = append(chains, Chain{Name: name})
	}
	for i := 0; i < nRules; i++ {
		a := ip4(i).As4()
		c := &chains[i%nChains]
		c.Rules = append(c.Rules, Rule{Rule: fmt.Sprintf("ip daddr %d.%d.%d.%d tcp dport %d accept", a[0], a[1], a[2], a[3], 1000+i%60000)})
	}
	d.Chains = append([]Chain{base}, chains...)
	s := Set{Name: "allowed", Type: "ipv4_addr", Elements: make([]Element, nElems)}
	for i := range s.Elements {
		s.Elements[i] = Element{Key: fmt.Sprintf("172.%d.%d.%d", byte(i>>16), byte(i>>8), byte(i))}
	}
	d.Sets = []Set{s}
	return d
}

// changedDesired returns a copy of d with rule 11 of chain c050 and the
// first element replaced; the copy shares every other slice with d, as a
// caller that rebuilds only what changed would.
func changedDesired(d *Desired) *Desired {
	c := *d
	c.Chains = append([]Chain(nil), d.Chains...)
	for i := range c.Chains {
		if c.Chains[i].Name == "c050" {
			c.Chains[i].Rules = append([]Rule(nil), c.Chains[i].Rules...)
			c.Chains[i].Rules[10] = Rule{Rule: "ip daddr 10.118.170.241 tcp dport 1 drop"}
		}
	}
	c.Sets = append([]Set(nil), d.Sets...)
	c.Sets[0].Elements = append([]Element(nil), d.Sets[0].Elements...)
	c.Sets[0].Elements[0] = Element{Key: "192.0.2.1"}
	return &c
}

// BenchmarkSyncOneChange is BenchmarkOneChange through the public API: one
// rule and one element change in a 50k-rule, 100k-element Desired.
func BenchmarkSyncOneChange(b *testing.B) {
	ns := testns.New(b, "engbench")
	e := newTestEngine(b, ns)
	ctx := context.Background()
	d0 := bigDesired(100, 50000, 100000)
	states := [2]*Desired{d0, changedDesired(d0)}
	if _, err := e.Sync(ctx, states[0]); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st, err := e.Sync(ctx, states[(i+1)%2])
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(st.Messages), "msgs/op")
	}
}

// BenchmarkSyncFullProgram programs N rules over 100 chains plus 100k set
// elements from text into a fresh namespace per iteration.
func BenchmarkSyncFullProgram(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			kerneltest.Require(b) // testns.Create does not check it
			d := bigDesired(100, n, 100000)
			b.ReportAllocs()
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
				if _, err := e.Sync(context.Background(), d); err != nil {
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

func BenchmarkCompile50k(b *testing.B) {
	d := bigDesired(100, 50000, 100000)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := compile(unix.NFPROTO_INET, d); err != nil {
			b.Fatal(err)
		}
	}
}
