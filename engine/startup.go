package engine

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/nfnl"
)

// nftaFlowtableTable is NFTA_FLOWTABLE_TABLE (x/sys lacks the flowtable
// attributes).
const nftaFlowtableTable = 1

// needsReplace reports whether our table, as found at start-up, holds
// anything the model cannot express and a diff would therefore leave
// behind: table flags (a dormant table enforces nothing), stateful objects
// or flowtables someone added to it. Such a table is replaced as a whole, in
// the same single transaction; anything else is diffed, so re-running a
// one-shot apply sends only what changed. Timeout sets are diffed like any
// set (their declarations only): replacing the table would drop the
// elements AddTimed added before the restart.
func (e *Engine) needsReplace() (string, error) {
	msgs, err := e.request(unix.NFT_MSG_GETTABLE, 0, func(m *enc) { m.Str(unix.NFTA_TABLE_NAME, e.table.Name) })
	if err != nil {
		return "", fmt.Errorf("get table: %w", err)
	}
	for _, r := range msgs {
		a, err := nfnl.Attrs(r.Data[nfgenHdrLen:])
		if err != nil {
			return "", fmt.Errorf("decode table: %w", err)
		}
		if f, ok := a[unix.NFTA_TABLE_FLAGS]; ok && nfnl.BE32(f) != 0 {
			return fmt.Sprintf("table flags %#x", nfnl.BE32(f)), nil
		}
	}
	for _, q := range []struct {
		what string
		typ  uint16
		attr uint16
	}{
		{"stateful object", unix.NFT_MSG_GETOBJ, unix.NFTA_OBJ_TABLE},
		{"flowtable", unix.NFT_MSG_GETFLOWTABLE, nftaFlowtableTable},
	} {
		msgs, err := e.request(q.typ, unix.NLM_F_DUMP, func(m *enc) { m.Str(q.attr, e.table.Name) })
		if err != nil {
			return "", fmt.Errorf("dump %ss: %w", q.what, err)
		}
		for _, r := range msgs {
			a, err := nfnl.Attrs(r.Data[nfgenHdrLen:])
			if err != nil {
				return "", fmt.Errorf("decode %s: %w", q.what, err)
			}
			if r.Data[0] == e.fam && nfnl.CStr(a[q.attr]) == e.table.Name {
				return "a " + q.what + " in our table", nil
			}
		}
	}
	return "", nil
}
