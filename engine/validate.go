package engine

import (
	"fmt"

	"github.com/nftguard/nftguard/engine/nftsyntax"
)

// Every string the engine sends or renders is one that nft reads back as
// it was written (see nftsyntax.CheckName and CheckComment): the kernel
// would store a name with a blank or a comment with a quote, but `nft list`
// would print text that does not load again, or that loads as more than
// our table. Rules and elements are held to this by nftsyntax, which
// compiles them; the names, types and comments around them are checked
// here, each error naming its object. The compilers upstream never produce
// such strings; this is the defence in depth.

func checkTableName(t Table) error {
	if err := nftsyntax.CheckName(t.Name); err != nil {
		return fmt.Errorf("table %q: %w", t.Name, err)
	}
	return nil
}

func checkChainHead(c *Chain) error {
	if err := nftsyntax.CheckName(c.Name); err != nil {
		return fmt.Errorf("chain %q: %w", c.Name, err)
	}
	switch c.Type {
	case "", "filter", "nat", "route":
	default:
		return fmt.Errorf("chain %q: unknown type %q", c.Name, c.Type)
	}
	if err := nftsyntax.CheckComment(c.Comment); err != nil {
		return fmt.Errorf("chain %q: %w", c.Name, err)
	}
	switch {
	case c.Hook == "ingress" && c.Device == "":
		return fmt.Errorf("chain %q: an ingress hook needs a device", c.Name)
	case c.Hook != "ingress" && c.Device != "":
		return fmt.Errorf("chain %q: a device is only for an ingress hook", c.Name)
	case c.Device != "":
		if err := CheckDevice(c.Device); err != nil {
			return fmt.Errorf("chain %q: %w", c.Name, err)
		}
	}
	return nil
}

// CheckDevice refuses a device name the kernel would refuse (more than 15
// bytes, empty, "." or "..", a slash, a colon or white space: see
// dev_valid_name) and one nft could not read back in quotes.
func CheckDevice(name string) error {
	if name == "" || len(name) > 15 || name == "." || name == ".." {
		return fmt.Errorf("device name %q: not a valid interface name", name)
	}
	for _, r := range name {
		if r <= ' ' || r > '~' || r == '/' || r == ':' || r == '"' || r == '\\' {
			return fmt.Errorf("device name %q: not a valid interface name", name)
		}
	}
	return nil
}

func checkSetHead(s *Set) error {
	if err := nftsyntax.CheckName(s.Name); err != nil {
		return fmt.Errorf("set %q: %w", s.Name, err)
	}
	if err := nftsyntax.CheckComment(s.Comment); err != nil {
		return fmt.Errorf("set %q: %w", s.Name, err)
	}
	if s.Timeout {
		// A timeout set's elements come from AddTimed only; the
		// diff never looks at them, so desired ones would be ignored.
		switch {
		case len(s.Elements) > 0:
			return fmt.Errorf("set %q: a timeout set has no desired elements (they are added with AddTimed)", s.Name)
		case s.Map != "":
			return fmt.Errorf("set %q: a timeout map is not supported", s.Name)
		case s.Interval:
			return fmt.Errorf("set %q: a timeout interval set is not supported", s.Name)
		}
	}
	return nil
}
