package engine

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftsyntax"
	"github.com/nftguard/nftguard/engine/nftwire"
	"github.com/nftguard/nftguard/internal/nfnl"
)

// ListedTable is one nftables table of any family and owner, as List reads
// it: decoded by the codec the engine reads its own table with, but kept
// as the kernel reports it (names, numbers, each expression on its own)
// rather than in the engine's diff form, since it may hold what the engine
// never writes.
type ListedTable struct {
	Family string // "ip", "ip6", "inet", "arp", "bridge", "netdev"
	Name   string
	Flags  uint32
	Chains []*ListedChain
	Sets   []*ListedSet
	fam    byte
}

func (t *ListedTable) String() string { return t.Family + " " + t.Name }

// ListedChain is a regular chain (Hook == "") or a base chain.
type ListedChain struct {
	Name     string
	Type     string // "filter", "nat", "route" (base chains)
	Hook     string // "forward", "postrouting", ... (see HookName)
	Device   string // the device of an ingress hook
	Priority int32
	Policy   string // "accept" or "drop" (base chains)
	Rules    []*ListedRule
}

// ListedRule is one rule with its expressions decoded one by one, so that
// an expression the codec does not know is recorded instead of dropped.
type ListedRule struct {
	Handle   uint64
	Exprs    []ListedExpr
	UserData []byte
	// Raw is the NFTA_RULE_EXPRESSIONS attribute as the kernel sent it.
	Raw []byte
	// Text is the rule in nft syntax when the engine's renderer can print
	// it (an inet table, every expression decoded, no named set); ""
	// otherwise, for the caller to describe as it sees fit.
	Text string
}

// ListedExpr is one expression of a rule.
type ListedExpr struct {
	Name string
	// Value is the decoded expression; nil when Name is unknown to the
	// codec or its data could not be decoded (Err says why).
	Value nftwire.Expr
	Err   string
}

// ListedSet is a named or anonymous set, map or verdict map.
type ListedSet struct {
	Name     string
	Flags    uint32
	KeyType  uint32
	KeyLen   uint32
	DataType uint32
	DataLen  uint32 // 0 for a verdict map, as in the engine's set form
	UserData []byte
	// Elements, read only for the tables ListOptions.ElementsOf names
	// and never for a timeout set (its elements are dynamic, see
	// Set.Timeout), are each element's identity as the engine compares elements (key,
	// key end, interval end, then value or verdict and user data), sorted.
	Elements [][]byte
}

// ListOptions say what List reads besides tables, chains, rules and sets.
type ListOptions struct {
	// ElementsOf names tables ("inet nftguard") whose set elements are
	// read too.
	ElementsOf []string
}

// List reads every nftables table of the network namespace at nsPath (the
// current one when "") over netlink. It sends nothing but dump requests:
// it never changes anything, so it may read tables the engine does not own.
func List(nsPath string, o ListOptions) ([]*ListedTable, error) {
	conn, err := nfnl.Dial(nsPath)
	if err != nil {
		return nil, fmt.Errorf("open nftables netlink socket: %w", err)
	}
	defer conn.Close()
	l := &lister{rw: nfnl.Raw(conn), buf: make([]byte, 1<<20)}
	var out []*ListedTable
	err = nfnl.Restart(5, func() (err error) {
		out, err = l.list(o)
		return err
	})
	return out, err
}

// lister sends List's requests.
type lister struct {
	rw  nfnl.Transport
	buf []byte
	seq uint32
}

// requester returns a requester in family fam that refuses anything but a
// dump or get: the read-only promise, enforced where requests are built.
func (l *lister) requester(fam byte) requester {
	return func(typ, flags uint16, build func(*enc)) ([]rawMsg, error) {
		switch typ {
		case unix.NFT_MSG_GETTABLE, unix.NFT_MSG_GETCHAIN, unix.NFT_MSG_GETRULE, unix.NFT_MSG_GETSET, unix.NFT_MSG_GETSETELEM:
		default:
			return nil, fmt.Errorf("refusing to send nftables message type %d", typ)
		}
		l.seq++
		var out []rawMsg
		err := sendRequest(l.rw, l.buf, l.seq, fam, typ, flags, build, func(r rawMsg) {
			if len(r.Data) < nfgenHdrLen {
				return
			}
			r.Data = append([]byte(nil), r.Data...)
			out = append(out, r)
		})
		return out, err
	}
}

func (l *lister) list(o ListOptions) ([]*ListedTable, error) {
	all := l.requester(unix.NFPROTO_UNSPEC)
	msgs, err := all(unix.NFT_MSG_GETTABLE, unix.NLM_F_DUMP, nil)
	if err != nil {
		return nil, fmt.Errorf("dump tables: %w", err)
	}
	var tables []*ListedTable
	byKey := map[string]*ListedTable{}
	for _, r := range msgs {
		a, err := nfnl.Attrs(r.Data[nfgenHdrLen:])
		if err != nil {
			return nil, fmt.Errorf("decode table: %w", err)
		}
		t := &ListedTable{Family: FamilyName(r.Data[0]), Name: nfnl.CStr(a[unix.NFTA_TABLE_NAME]), Flags: nfnl.BE32(a[unix.NFTA_TABLE_FLAGS]), fam: r.Data[0]}
		tables = append(tables, t)
		byKey[t.String()] = t
	}
	// One dump of every chain and one of every set: the kernel filters
	// those dumps by family only, so a dump per table would read every
	// table's chains once per table.
	// A table that appeared between the dumps interrupts the listing.
	err = dumpChains(all, nil, func(fam byte, tbl string, c *kernelChain) error {
		t := byKey[FamilyName(fam)+" "+tbl]
		if t == nil {
			return nfnl.ErrDumpInterrupted
		}
		lc := &ListedChain{Name: c.name}
		if c.base {
			lc.Type, lc.Hook, lc.Device, lc.Priority, lc.Policy = c.typ, HookName(t.Family, c.hook), c.dev, c.prio, "accept"
			if c.policy == nfDrop {
				lc.Policy = "drop"
			}
		}
		t.Chains = append(t.Chains, lc)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = dumpSets(all, nil, func(fam byte, tbl string, s *kernelSet) error {
		t := byKey[FamilyName(fam)+" "+tbl]
		if t == nil {
			return nfnl.ErrDumpInterrupted
		}
		ls := &ListedSet{Name: s.name, Flags: s.flags, KeyType: s.keyType, KeyLen: s.keyLen, DataType: s.dataType, DataLen: s.dataLen, UserData: s.userdata}
		if slices.Contains(o.ElementsOf, t.String()) && !dynamicElems(s) {
			if err := readElems(l.requester(t.fam), t.Name, s); err != nil {
				return notGone(fmt.Errorf("table %s: %w", t, err))
			}
			for id, el := range s.elems {
				ls.Elements = append(ls.Elements, []byte(id+"="+elemValue(el)))
			}
			slices.SortFunc(ls.Elements, bytes.Compare)
		}
		t.Sets = append(t.Sets, ls)
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, t := range tables {
		req := l.requester(t.fam)
		for _, c := range t.Chains {
			var derr error
			err := dumpRules(req, t.fam, t.Name, c.Name, func(a map[uint16][]byte) {
				r := &ListedRule{Handle: nfnl.BE64(a[unix.NFTA_RULE_HANDLE]), UserData: a[unix.NFTA_RULE_USERDATA], Raw: a[unix.NFTA_RULE_EXPRESSIONS]}
				var err error
				if r.Exprs, err = listExprs(t.fam, r.Raw); err != nil {
					derr = cmp.Or(derr, fmt.Errorf("decode rule %d in %s chain %s: %w", r.Handle, t, c.Name, err))
					return
				}
				r.Text = listedText(t, r)
				c.Rules = append(c.Rules, r)
			})
			if err = cmp.Or(err, derr); err != nil {
				return nil, notGone(fmt.Errorf("table %s: %w", t, err))
			}
		}
	}
	return tables, nil
}

// notGone turns ENOENT, a chain or set deleted since the dump that listed
// it, into a dump to restart.
func notGone(err error) error {
	if errors.Is(err, unix.ENOENT) {
		return nfnl.ErrDumpInterrupted
	}
	return err
}

// listExprs decodes NFTA_RULE_EXPRESSIONS one expression at a time with the
// engine's expression decoder; one it cannot decode keeps its name and the
// reason.
func listExprs(fam byte, b []byte) ([]ListedExpr, error) {
	var out []ListedExpr
	var aerr error
	err := nfnl.WalkAttrs(b, func(typ uint16, data []byte) {
		if aerr != nil || typ != unix.NFTA_LIST_ELEM {
			return
		}
		name, xdata, err := exprAttrs(data)
		if err != nil {
			aerr = err
			return
		}
		e := ListedExpr{Name: name}
		if e.Value, err = nftwire.DecodeExpr(nftwire.Family(fam), name, xdata); err != nil {
			e.Value, e.Err = nil, err.Error()
		}
		out = append(out, e)
	})
	if err != nil {
		return nil, err
	}
	return out, aerr
}

// noSets resolves no named set: a rule that uses one is left without text.
type noSets struct{}

func (noSets) LookupSet(string) (nftsyntax.SetDecl, bool) { return nftsyntax.SetDecl{}, false }

// listedText renders a rule the way the engine renders its own, when it can.
func listedText(t *ListedTable, r *ListedRule) string {
	if t.fam != unix.NFPROTO_INET {
		return ""
	}
	exprs := make([]nftwire.Expr, 0, len(r.Exprs))
	for _, e := range r.Exprs {
		if e.Value == nil {
			return ""
		}
		exprs = append(exprs, e.Value)
	}
	text, err := nftsyntax.RenderRule(unix.NFPROTO_INET, &nftsyntax.Compiled{Exprs: exprs, UserData: r.UserData}, noSets{})
	if err != nil {
		return ""
	}
	return text
}

// familyNames are the nftables families by NFPROTO number.
var familyNames = map[byte]string{
	unix.NFPROTO_INET:   "inet",
	unix.NFPROTO_IPV4:   "ip",
	unix.NFPROTO_ARP:    "arp",
	unix.NFPROTO_NETDEV: "netdev",
	unix.NFPROTO_BRIDGE: "bridge",
	unix.NFPROTO_IPV6:   "ip6",
}

// FamilyName is nft's name of an NFPROTO family number.
func FamilyName(f byte) string {
	if n, ok := familyNames[f]; ok {
		return n
	}
	return fmt.Sprintf("family-%d", f)
}

// nfInetIngress is NF_INET_INGRESS (linux/netfilter.h), which
// golang.org/x/sys/unix does not define.
const nfInetIngress = 5

// HookName is nft's name of hook number num in a family: the inverse of
// the hooks the compiler accepts for inet, ip and ip6 (and bridge, which
// numbers its hooks alike), plus the hooks only other families have.
func HookName(family string, num uint32) string {
	switch family {
	case "arp":
		// NF_ARP_IN, NF_ARP_OUT, NF_ARP_FORWARD
		if names := []string{"input", "output", "forward"}; int(num) < len(names) {
			return names[num]
		}
	case "netdev":
		switch num {
		case unix.NF_NETDEV_INGRESS:
			return "ingress"
		case unix.NF_NETDEV_EGRESS:
			return "egress"
		}
	default:
		for name, n := range hooks {
			if n == num {
				return name
			}
		}
	}
	return fmt.Sprintf("hook-%d", num)
}
