package fqdn

import (
	"strings"
	"testing"
)

func TestParsePattern(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	// 3 labels of 63 and one of 61, with the dots: 253 characters.
	longest := label63 + "." + label63 + "." + label63 + "." + strings.Repeat("b", 61)
	tests := []struct {
		in      string
		want    Pattern
		wantErr string
	}{
		{in: "a.example", want: Pattern{Domain: "a.example"}},
		{in: "A.Example.", want: Pattern{Domain: "a.example"}},
		{in: "*.a.example", want: Pattern{Domain: "a.example", Wildcard: true}},
		{in: "*.A.EXAMPLE.", want: Pattern{Domain: "a.example", Wildcard: true}},
		{in: "x-1.under_score.example", want: Pattern{Domain: "x-1.under_score.example"}},
		{in: "123.example", want: Pattern{Domain: "123.example"}},
		{in: label63 + ".example", want: Pattern{Domain: label63 + ".example"}},
		{in: longest, want: Pattern{Domain: longest}},
		{in: longest + ".", want: Pattern{Domain: longest}},
		{in: "*." + longest, want: Pattern{Domain: longest, Wildcard: true}},

		{in: "", wantErr: "at least two labels"},
		{in: "example", wantErr: "at least two labels"},
		{in: "*.example", wantErr: "at least two labels"},
		{in: "example.", wantErr: "at least two labels"},
		{in: "*", wantErr: "at least two labels"},
		{in: "a..example", wantErr: "1 to 63"},
		{in: ".a.example", wantErr: "1 to 63"},
		{in: "a.example..", wantErr: "1 to 63"},
		{in: label63 + "a.example", wantErr: "1 to 63"},
		{in: longest + "b", wantErr: "longer than 253"},
		{in: "a*.example", wantErr: "only letters"},
		{in: "*a.example", wantErr: "only letters"},
		{in: "x.*.example", wantErr: "only letters"},
		{in: "**.a.example", wantErr: "only letters"},
		{in: "*.*.a.example", wantErr: "only letters"},
		{in: "-a.example", wantErr: "only letters"},
		{in: "a-.example", wantErr: "only letters"},
		{in: "_a.example", wantErr: "only letters"},
		{in: "a.example_", wantErr: "only letters"},
		{in: "a b.example", wantErr: "only letters"},
		{in: "ä.example", wantErr: "only letters"},
		{in: "a.example\x00", wantErr: "only letters"},
		{in: "a/b.example", wantErr: "only letters"},
	}
	for _, tt := range tests {
		got, err := ParsePattern(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParsePattern(%q) = %+v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParsePattern(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestPatternString(t *testing.T) {
	for _, in := range []string{"a.example", "*.a.example"} {
		p, err := ParsePattern(in)
		if err != nil {
			t.Fatal(err)
		}
		if p.String() != in {
			t.Errorf("ParsePattern(%q).String() = %q", in, p.String())
		}
		back, err := ParsePattern(p.String())
		if err != nil || back != p {
			t.Errorf("round trip of %q: %+v, %v", in, back, err)
		}
	}
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"a.example":     "a.example",
		"A.Example.":    "a.example",
		"WWW.A.EXAMPLE": "www.a.example",
		".":             "",
		"":              "",
	} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMatches(t *testing.T) {
	plain := Pattern{Domain: "a.example"}
	wild := Pattern{Domain: "a.example", Wildcard: true}
	tests := []struct {
		name        string
		plain, wild bool
	}{
		{"a.example", true, false},
		{"x.a.example", false, true},
		{"x.y.a.example", false, true},
		{"xa.example", false, false},
		{"x.xa.example", false, false},
		{"a.example.org", false, false},
		{"example", false, false},
		{".a.example", false, false}, // an empty label is no label
		{"b.example", false, false},
		{"", false, false},
	}
	for _, tt := range tests {
		if got := plain.Matches(tt.name); got != tt.plain {
			t.Errorf("%v.Matches(%q) = %v, want %v", plain, tt.name, got, tt.plain)
		}
		if got := wild.Matches(tt.name); got != tt.wild {
			t.Errorf("%v.Matches(%q) = %v, want %v", wild, tt.name, got, tt.wild)
		}
	}
	// Patterns compare with normalized names: upper case and the trailing
	// dot are the caller's to remove.
	if !wild.Matches(Normalize("X.A.EXAMPLE.")) || !plain.Matches(Normalize("A.example.")) {
		t.Error("normalized names do not match")
	}
}
