package tabletest

import (
	"reflect"
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
