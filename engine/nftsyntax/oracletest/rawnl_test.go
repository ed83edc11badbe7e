package oracletest

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"

	gnft "github.com/google/nftables"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/engine/nftwire"
	"github.com/nftguard/nftguard/internal/testns"
)

// Netlink attribute numbers (linux/netfilter/nf_tables.h).
const (
	attrSetTable    = 1
	attrSetName     = 2
	attrSetFlags    = 3
	attrSetKeyType  = 4
	attrSetKeyLen   = 5
	attrSetDataType = 6
	attrSetDataLen  = 7
	attrSetDesc     = 9
	attrSetUserData = 13
	attrSetHandle   = 16

	attrElemListTable = 1
	attrElemListSet   = 2
	attrElemListElems = 3
	attrListElem      = 1

	attrElemKey      = 1
	attrElemData     = 2
	attrElemFlags    = 3
	attrElemUserData = 6
	attrElemKeyEnd   = 10

	attrDataValue   = 1
	attrDataVerdict = 2
	attrVerdictCode = 1
	attrVerdictName = 2

	elemFlagIntervalEnd = 1

	nestedMask = ^uint16(unix.NLA_F_NESTED | unix.NLA_F_NET_BYTEORDER)
)

var attrSetNames = map[uint16]string{
	attrSetTable: "TABLE", attrSetName: "NAME", attrSetFlags: "FLAGS", attrSetKeyType: "KEY_TYPE",
	attrSetKeyLen: "KEY_LEN", attrSetDataType: "DATA_TYPE", attrSetDataLen: "DATA_LEN", 8: "POLICY",
	attrSetDesc: "DESC", 11: "TIMEOUT", 12: "GC_INTERVAL", attrSetUserData: "USERDATA",
	attrSetHandle: "HANDLE", 17: "EXPR", 18: "EXPRESSIONS",
}

// rawConn is a raw nfnetlink socket inside a test namespace.
type rawConn struct{ c *netlink.Conn }

func dialRaw(ns *testns.NS) (*rawConn, error) {
	f, err := os.Open(ns.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: int(f.Fd())})
	runtime.KeepAlive(f)
	if err != nil {
		return nil, fmt.Errorf("dial nfnetlink in %s: %w", ns.Name, err)
	}
	return &rawConn{c: c}, nil
}

func (r *rawConn) Close() error { return r.c.Close() }

func nfgen(family byte) []byte { return []byte{family, unix.NFNETLINK_V0, 0, 0} }

func (r *rawConn) request(msgType int, flags netlink.HeaderFlags, attrs []netlink.Attribute) ([]netlink.Message, error) {
	b, err := netlink.MarshalAttributes(attrs)
	if err != nil {
		return nil, err
	}
	return r.c.Execute(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | msgType), Flags: netlink.Request | flags},
		Data:   append(nfgen(unix.NFPROTO_INET), b...),
	})
}

func cstr(s string) []byte { return append([]byte(s), 0) }

// rawSet is one NFT_MSG_GETSET reply: every attribute the kernel sent, by
// type (nested flag masked off), value bytes unparsed.
type rawSet map[uint16][]byte

func (r *rawConn) getSet(table, name string) (rawSet, error) {
	msgs, err := r.request(unix.NFT_MSG_GETSET, 0, []netlink.Attribute{
		{Type: attrSetTable, Data: cstr(table)},
		{Type: attrSetName, Data: cstr(name)},
	})
	if err != nil {
		return nil, fmt.Errorf("GETSET %s: %w", name, err)
	}
	if len(msgs) != 1 || len(msgs[0].Data) < 4 {
		return nil, fmt.Errorf("GETSET %s: %d replies", name, len(msgs))
	}
	attrs, err := netlink.UnmarshalAttributes(msgs[0].Data[4:])
	if err != nil {
		return nil, fmt.Errorf("GETSET %s: %w", name, err)
	}
	out := rawSet{}
	for _, a := range attrs {
		out[a.Type&nestedMask] = a.Data
	}
	return out, nil
}

func (s rawSet) u32(typ uint16) (uint32, bool) {
	b, ok := s[typ]
	if !ok || len(b) != 4 {
		return 0, false
	}
	return binary.BigEndian.Uint32(b), true
}

// String prints the attributes that describe the set (the handle, a
// kernel-assigned number, is left out), one per line, sorted by type.
func (s rawSet) String() string {
	var types []int
	for t := range s {
		if t != attrSetHandle {
			types = append(types, int(t))
		}
	}
	sort.Ints(types)
	var b strings.Builder
	for _, t := range types {
		n := attrSetNames[uint16(t)]
		if n == "" {
			n = fmt.Sprintf("attr%d", t)
		}
		fmt.Fprintf(&b, "%s=%s\n", n, hex.EncodeToString(s[uint16(t)]))
	}
	return b.String()
}

// rawElem is one element as the kernel dumps it: the parsed form and a
// canonical text of all its attributes (for byte-exact comparison).
type rawElem struct {
	elem nftwire.Elem
	raw  string
}

func (r *rawConn) getElems(table, set string) ([]rawElem, error) {
	msgs, err := r.request(unix.NFT_MSG_GETSETELEM, netlink.Dump, []netlink.Attribute{
		{Type: attrElemListTable, Data: cstr(table)},
		{Type: attrElemListSet, Data: cstr(set)},
	})
	if err != nil {
		return nil, fmt.Errorf("GETSETELEM %s: %w", set, err)
	}
	var out []rawElem
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		attrs, err := netlink.UnmarshalAttributes(m.Data[4:])
		if err != nil {
			return nil, err
		}
		for _, a := range attrs {
			if a.Type&nestedMask != attrElemListElems {
				continue
			}
			list, err := netlink.UnmarshalAttributes(a.Data)
			if err != nil {
				return nil, err
			}
			for _, le := range list {
				if le.Type&nestedMask != attrListElem {
					continue
				}
				e, err := parseElem(le.Data)
				if err != nil {
					return nil, fmt.Errorf("set %s: %w", set, err)
				}
				out = append(out, e)
			}
		}
	}
	return out, nil
}

func nestedValue(b []byte) ([]byte, error) {
	attrs, err := netlink.UnmarshalAttributes(b)
	if err != nil {
		return nil, err
	}
	for _, a := range attrs {
		if a.Type&nestedMask == attrDataValue {
			return a.Data, nil
		}
	}
	return nil, fmt.Errorf("no NFTA_DATA_VALUE")
}

func parseElem(b []byte) (rawElem, error) {
	attrs, err := netlink.UnmarshalAttributes(b)
	if err != nil {
		return rawElem{}, err
	}
	var re rawElem
	var parts []string
	for _, a := range attrs {
		t := a.Type & nestedMask
		parts = append(parts, fmt.Sprintf("%d=%s", t, hex.EncodeToString(a.Data)))
		switch t {
		case attrElemKey:
			if re.elem.Key, err = nestedValue(a.Data); err != nil {
				return re, err
			}
		case attrElemKeyEnd:
			if re.elem.KeyEnd, err = nestedValue(a.Data); err != nil {
				return re, err
			}
		case attrElemFlags:
			re.elem.IntervalEnd = binary.BigEndian.Uint32(a.Data)&elemFlagIntervalEnd != 0
		case attrElemUserData:
			re.elem.UserData = a.Data
		case attrElemData:
			inner, err := netlink.UnmarshalAttributes(a.Data)
			if err != nil {
				return re, err
			}
			for _, d := range inner {
				switch d.Type & nestedMask {
				case attrDataValue:
					re.elem.Data = d.Data
				case attrDataVerdict:
					va, err := netlink.UnmarshalAttributes(d.Data)
					if err != nil {
						return re, err
					}
					v := &nftwire.Verdict{}
					for _, x := range va {
						switch x.Type & nestedMask {
						case attrVerdictCode:
							v.Kind = nftwire.VerdictKind(int32(binary.BigEndian.Uint32(x.Data)))
						case attrVerdictName:
							v.Chain = strings.TrimRight(string(x.Data), "\x00")
						}
					}
					re.elem.Verdict = v
				}
			}
		}
	}
	sort.Strings(parts)
	re.raw = strings.Join(parts, " ")
	return re, nil
}

// elemString is a canonical text of an Elem built by EncodeElements, in the
// same form as rawElem.raw would give for the kernel's copy of it, minus
// attributes the kernel adds. Used to compare EncodeElements with nft.
func elemString(e nftwire.Elem) string {
	var parts []string
	parts = append(parts, "key="+hex.EncodeToString(e.Key))
	if e.KeyEnd != nil {
		parts = append(parts, "keyend="+hex.EncodeToString(e.KeyEnd))
	}
	if e.IntervalEnd {
		parts = append(parts, "intervalend")
	}
	if e.Data != nil {
		parts = append(parts, "data="+hex.EncodeToString(e.Data))
	}
	if e.Verdict != nil {
		parts = append(parts, fmt.Sprintf("verdict=%d:%s", e.Verdict.Kind, e.Verdict.Chain))
	}
	if e.UserData != nil {
		parts = append(parts, "udata="+hex.EncodeToString(e.UserData))
	}
	return strings.Join(parts, " ")
}

// deleteElems sends one DELSETELEM batch with elems in the given order.
func deleteElems(ns *testns.NS, set string, elems []nftwire.Elem) error {
	f, err := os.Open(ns.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	c, err := gnft.New(gnft.WithNetNSFd(int(f.Fd())))
	if err != nil {
		return err
	}
	tbl := &gnft.Table{Name: tableName, Family: gnft.TableFamilyINet}
	s := &gnft.Set{Table: tbl, Name: set, KeyType: gnft.TypeIPAddr, Interval: true}
	var els []gnft.SetElement
	for _, e := range elems {
		els = append(els, gnft.SetElement{Key: e.Key, IntervalEnd: e.IntervalEnd})
	}
	if err := c.SetDeleteElements(s, els); err != nil {
		return err
	}
	err = c.Flush()
	runtime.KeepAlive(f)
	return err
}
