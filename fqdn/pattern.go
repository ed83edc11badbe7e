package fqdn

import (
	"fmt"
	"strings"
)

// maxName is the longest domain name in presentation form without its
// trailing dot (RFC 1035: 255 octets on the wire).
const maxName = 253

// Pattern is one domainNames entry: Domain, lower case and without the
// trailing dot, and whether "*." came before it.
type Pattern struct {
	Domain   string
	Wildcard bool
}

// String is the pattern as the API writes it, normalized.
func (p Pattern) String() string {
	if p.Wildcard {
		return "*." + p.Domain
	}
	return p.Domain
}

// ParsePattern parses a domainNames entry as the API's schema admits it:
// an optional "*." and at least two labels of letters, digits, '-' and
// '_' that neither begin nor end with '-' or '_', and an optional trailing
// dot.
func ParsePattern(s string) (Pattern, error) {
	var p Pattern
	rest := s
	if after, ok := strings.CutPrefix(rest, "*."); ok {
		p.Wildcard, rest = true, after
	}
	rest = strings.TrimSuffix(rest, ".")
	if len(rest) > maxName {
		return Pattern{}, fmt.Errorf("domain name %q is longer than %d characters", s, maxName)
	}
	labels := strings.Split(rest, ".")
	if len(labels) < 2 {
		return Pattern{}, fmt.Errorf("domain name %q needs at least two labels", s)
	}
	for _, l := range labels {
		if err := checkLabel(l); err != nil {
			return Pattern{}, fmt.Errorf("domain name %q: %w", s, err)
		}
	}
	p.Domain = strings.ToLower(rest)
	return p, nil
}

func checkLabel(l string) error {
	if l == "" || len(l) > 63 {
		return fmt.Errorf("label %q must be 1 to 63 characters", l)
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if alnum {
			continue
		}
		if (c != '-' && c != '_') || i == 0 || i == len(l)-1 {
			return fmt.Errorf("label %q: only letters, digits, '-' and '_' inside a label", l)
		}
	}
	return nil
}

// Matches reports whether a normalized name (see Normalize: every '.' in
// it is a label boundary) matches: the domain itself for a plain pattern;
// for a wildcard, one or more whole labels before the domain, never the
// domain itself.
func (p Pattern) Matches(name string) bool {
	if !p.Wildcard {
		return name == p.Domain
	}
	rest, ok := strings.CutSuffix(name, "."+p.Domain)
	// An empty label is no label: ".a.example" and "x..a.example" are
	// not names.
	return ok && rest != "" && rest[0] != '.' && !strings.Contains(rest, "..") && !strings.HasSuffix(rest, ".")
}
