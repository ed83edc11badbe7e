package tabletest

import (
	"reflect"
	"runtime"
	"testing"

	"github.com/nftguard/nftguard/engine"
)

func TestReaders(t *testing.T) {
	chains := []engine.Chain{
		{Name: "a", Rules: []engine.Rule{{Rule: "ip saddr 10.0.0.1 accept"}, {Rule: "drop", Comment: "end"}}},
		{Name: "b"},
	}
	sets := []engine.Set{
		{Name: "s", Elements: []engine.Element{{Key: "10.0.0.1"}, {Key: "10.0.0.2"}}},
		{Name: "m", Map: "verdict", Elements: []engine.Element{{Key: "10.0.0.1", Value: "goto a"}}},
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"chain names", ChainNames(chains), []string{"a", "b"}},
		{"no chains", ChainNames(nil), []string(nil)},
		{"rules of a", Rules(Chain(t, chains, "a")), []string{"ip saddr 10.0.0.1 accept", "drop"}},
		{"rules of an empty chain", Rules(Chain(t, chains, "b")), []string(nil)},
		{"set elements", Elements(Set(t, sets, "s")), []string{"10.0.0.1", "10.0.0.2"}},
		{"map elements", Elements(Set(t, sets, "m")), []string{"10.0.0.1 : goto a"}},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, c.got, c.want)
		}
	}
	EqualLines(t, "same lines", []string{"a", "b"}, []string{"a", "b"})
}

// recorder is a testing.TB that records failures; Fatal ends the calling
// goroutine, as the testing package's does.
type recorder struct {
	testing.TB
	failed, fatal bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Fatal(...any)          { r.failed, r.fatal = true, true; runtime.Goexit() }
func (r *recorder) Fatalf(string, ...any) { r.failed, r.fatal = true, true; runtime.Goexit() }

func TestLoads(t *testing.T) {
	base := engine.Chain{Name: "forward", Type: "filter", Hook: "forward", Priority: 0, Policy: "accept"}
	for _, c := range []struct {
		name          string
		d             *engine.Desired
		failed, fatal bool
	}{
		{"loads", &engine.Desired{Chains: []engine.Chain{base, {Name: "a", Rules: []engine.Rule{{Rule: "ip saddr @s accept"}}}},
			Sets: []engine.Set{{Name: "s", Type: "ipv4_addr", Elements: []engine.Element{{Key: "10.0.0.1"}}}}}, false, false},
		{"nft would not accept it", &engine.Desired{Chains: []engine.Chain{{Name: "a", Rules: []engine.Rule{{Rule: "ip saddr frobnicate"}}}}}, true, true},
	} {
		r := &recorder{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			Loads(r, c.d)
		}()
		<-done
		if r.failed != c.failed || r.fatal != c.fatal {
			t.Errorf("%s: failed %v, fatal %v; want %v, %v", c.name, r.failed, r.fatal, c.failed, c.fatal)
		}
	}
}
