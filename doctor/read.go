package doctor

import (
	"fmt"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftwire"
	"github.com/nftguard/nftguard/internal/nfnl"
)

// familyNames are the nftables families by NFPROTO number.
var familyNames = map[byte]string{
	unix.NFPROTO_INET:   "inet",
	unix.NFPROTO_IPV4:   "ip",
	unix.NFPROTO_ARP:    "arp",
	unix.NFPROTO_NETDEV: "netdev",
	unix.NFPROTO_BRIDGE: "bridge",
	unix.NFPROTO_IPV6:   "ip6",
}

func familyName(f byte) string {
	if n, ok := familyNames[f]; ok {
		return n
	}
	return fmt.Sprintf("family-%d", f)
}

func hookName(family string, num uint32) string {
	var names []string
	switch family {
	case "arp":
		names = []string{"input", "output", "forward"}
	case "netdev":
		names = []string{"ingress", "egress"}
	default:
		names = []string{"prerouting", "input", "forward", "output", "postrouting", "ingress"}
	}
	if int(num) < len(names) {
		return names[num]
	}
	return fmt.Sprintf("hook-%d", num)
}

// ReadOptions say what to read besides tables, chains, rules and sets.
type ReadOptions struct {
	// ElementsOf names tables ("inet nftguard") whose set elements are
	// read too, for comparing them.
	ElementsOf []string
}

// Read dumps the whole nftables ruleset of the namespace at path (the
// current one when ""), and its iptables-legacy tables. It only sends dump
// requests and reads files: it never changes anything.
func Read(path string, opts ReadOptions) (*Ruleset, error) {
	d, err := dialIn(path)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var rs *Ruleset
	err = nfnl.Restart(5, func() (err error) {
		rs, err = d.readAll(opts)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read ruleset: %w", err)
	}
	legacy, lerr := readLegacy(path)
	rs.Legacy = legacy
	if lerr != nil {
		rs.LegacyErr = lerr.Error()
	}
	return rs, nil
}

func (d *dumper) readAll(opts ReadOptions) (*Ruleset, error) {
	rs := &Ruleset{}
	byKey := map[string]*Table{}
	tables, err := d.dump(unix.NFT_MSG_GETTABLE, unix.NFPROTO_UNSPEC)
	if err != nil {
		return nil, fmt.Errorf("dump tables: %w", err)
	}
	for _, r := range tables {
		a, err := nfnl.Attrs(r.attrs)
		if err != nil {
			return nil, fmt.Errorf("decode table: %w", err)
		}
		t := &Table{Family: familyName(r.family), Name: nfnl.CStr(a[unix.NFTA_TABLE_NAME]), Flags: nfnl.BE32(a[unix.NFTA_TABLE_FLAGS])}
		rs.Tables = append(rs.Tables, t)
		byKey[t.String()] = t
	}
	chains := map[string]*Chain{} // "family table chain"
	msgs, err := d.dump(unix.NFT_MSG_GETCHAIN, unix.NFPROTO_UNSPEC)
	if err != nil {
		return nil, fmt.Errorf("dump chains: %w", err)
	}
	for _, r := range msgs {
		a, err := nfnl.Attrs(r.attrs)
		if err != nil {
			return nil, fmt.Errorf("decode chain: %w", err)
		}
		t := byKey[familyName(r.family)+" "+nfnl.CStr(a[unix.NFTA_CHAIN_TABLE])]
		if t == nil {
			return nil, nfnl.ErrDumpInterrupted // a table appeared between the dumps
		}
		c := &Chain{Name: nfnl.CStr(a[unix.NFTA_CHAIN_NAME]), Type: nfnl.CStr(a[unix.NFTA_CHAIN_TYPE])}
		if h, ok := a[unix.NFTA_CHAIN_HOOK]; ok {
			ha, err := nfnl.Attrs(h)
			if err != nil {
				return nil, fmt.Errorf("decode chain %s hook: %w", c.Name, err)
			}
			c.Hook = hookName(t.Family, nfnl.BE32(ha[unix.NFTA_HOOK_HOOKNUM]))
			c.Priority = int32(nfnl.BE32(ha[unix.NFTA_HOOK_PRIORITY]))
			c.Policy = "accept"
			if p, ok := a[unix.NFTA_CHAIN_POLICY]; ok && nfnl.BE32(p) == nfDrop {
				c.Policy = "drop"
			}
		}
		t.Chains = append(t.Chains, c)
		chains[t.String()+" "+c.Name] = c
	}
	msgs, err = d.dump(unix.NFT_MSG_GETSET, unix.NFPROTO_UNSPEC)
	if err != nil {
		return nil, fmt.Errorf("dump sets: %w", err)
	}
	for _, r := range msgs {
		a, err := nfnl.Attrs(r.attrs)
		if err != nil {
			return nil, fmt.Errorf("decode set: %w", err)
		}
		t := byKey[familyName(r.family)+" "+nfnl.CStr(a[unix.NFTA_SET_TABLE])]
		if t == nil {
			return nil, nfnl.ErrDumpInterrupted
		}
		s := &Set{Name: nfnl.CStr(a[unix.NFTA_SET_NAME]), Flags: nfnl.BE32(a[unix.NFTA_SET_FLAGS]),
			KeyType: nfnl.BE32(a[unix.NFTA_SET_KEY_TYPE]), KeyLen: nfnl.BE32(a[unix.NFTA_SET_KEY_LEN]),
			DataType: nfnl.BE32(a[unix.NFTA_SET_DATA_TYPE]), DataLen: nfnl.BE32(a[unix.NFTA_SET_DATA_LEN]),
			UserData: a[unix.NFTA_SET_USERDATA]}
		t.Sets = append(t.Sets, s)
	}
	for _, key := range opts.ElementsOf {
		t := byKey[key]
		if t == nil {
			continue
		}
		for _, s := range t.Sets {
			if err := d.readElements(r2fam(t.Family), t.Name, s); err != nil {
				return nil, err
			}
		}
	}
	msgs, err = d.dump(unix.NFT_MSG_GETRULE, unix.NFPROTO_UNSPEC)
	if err != nil {
		return nil, fmt.Errorf("dump rules: %w", err)
	}
	for _, r := range msgs {
		a, err := nfnl.Attrs(r.attrs)
		if err != nil {
			return nil, fmt.Errorf("decode rule: %w", err)
		}
		fam := familyName(r.family)
		c := chains[fam+" "+nfnl.CStr(a[unix.NFTA_RULE_TABLE])+" "+nfnl.CStr(a[unix.NFTA_RULE_CHAIN])]
		if c == nil {
			return nil, nfnl.ErrDumpInterrupted
		}
		rule := &Rule{Handle: nfnl.BE64(a[unix.NFTA_RULE_HANDLE]), UserData: a[unix.NFTA_RULE_USERDATA], Raw: a[unix.NFTA_RULE_EXPRESSIONS]}
		rule.Exprs, err = decodeExprs(r.family, rule.Raw)
		if err != nil {
			return nil, fmt.Errorf("decode rule %d in %s %s: %w", rule.Handle, fam, nfnl.CStr(a[unix.NFTA_RULE_CHAIN]), err)
		}
		c.Rules = append(c.Rules, rule)
	}
	for _, t := range rs.Tables {
		for _, c := range t.Chains {
			for _, r := range c.Rules {
				r.Text = renderRule(t, r)
			}
		}
	}
	return rs, nil
}

func r2fam(name string) byte {
	for f, n := range familyNames {
		if n == name {
			return f
		}
	}
	return unix.NFPROTO_UNSPEC
}

func (d *dumper) readElements(fam byte, table string, s *Set) error {
	msgs, err := d.dump(unix.NFT_MSG_GETSETELEM, fam,
		strAttr{unix.NFTA_SET_ELEM_LIST_TABLE, table}, strAttr{unix.NFTA_SET_ELEM_LIST_SET, s.Name})
	if err != nil {
		return fmt.Errorf("dump elements of set %s: %w", s.Name, err)
	}
	for _, r := range msgs {
		a, err := nfnl.Attrs(r.attrs)
		if err != nil {
			return fmt.Errorf("decode elements of set %s: %w", s.Name, err)
		}
		elems, err := nfnl.AttrList(a[unix.NFTA_SET_ELEM_LIST_ELEMENTS])
		if err != nil {
			return fmt.Errorf("decode elements of set %s: %w", s.Name, err)
		}
		s.Elements = append(s.Elements, elems...)
	}
	sort.Slice(s.Elements, func(i, j int) bool { return string(s.Elements[i]) < string(s.Elements[j]) })
	return nil
}

// decodeExprs decodes NFTA_RULE_EXPRESSIONS one expression at a time, so an
// unknown expression is kept as a name instead of being dropped.
func decodeExprs(fam byte, b []byte) ([]Expr, error) {
	elems, err := nfnl.AttrList(b)
	if err != nil {
		return nil, err
	}
	var out []Expr
	for _, el := range elems {
		a, err := nfnl.Attrs(el)
		if err != nil {
			return nil, err
		}
		e := Expr{Name: nfnl.CStr(a[unix.NFTA_EXPR_NAME])}
		v, err := nftwire.DecodeExpr(nftwire.Family(fam), e.Name, a[unix.NFTA_EXPR_DATA])
		if err != nil {
			e.Err = err.Error()
			out = append(out, e)
			continue
		}
		e.Value = v
		out = append(out, e)
	}
	return out, nil
}

// nfDrop is NF_DROP, the verdict value of a chain policy "drop".
const nfDrop = 0
