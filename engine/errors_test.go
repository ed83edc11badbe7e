package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nftguard/nftguard/internal/nfnl"
	"github.com/nftguard/nftguard/internal/testns"
)

// TestErrorText: an Error reads as the refused operation, its object and
// the kernel's reason; wrapped, it is still found by errors.As, errors.Is
// and the predicates.
func TestErrorText(t *testing.T) {
	for _, tc := range []struct {
		err  *Error
		want string
	}{
		{&Error{Op: "add rule to chain", Object: "c", Index: 2, Text: "jump x", Message: 7, Errno: unix.ENOENT},
			`add rule to chain "c" (rule 2: "jump x"): no such file or directory`},
		{&Error{Op: "add rule to chain", Object: "c", Index: 2, Message: 7, Errno: unix.EINVAL},
			`add rule to chain "c" (rule 2): invalid argument`},
		{&Error{Op: "add elements to set", Object: "s", Index: 3, Count: 2, Text: "10.0.0.0/8", Errno: unix.EEXIST, More: 2},
			`add elements to set "s" (elements 3-4, first 10.0.0.0/8): file exists (and 2 more failing operations)`},
		{&Error{Op: "add elements to set", Object: "s", Text: "1.2.3.4 : jump x", Message: -1, Errno: unix.ENOENT},
			`add elements to set "s" (1.2.3.4 : jump x): no such file or directory`},
		{&Error{Op: "add table", Errno: unix.EPERM}, `add table: operation not permitted`},
		{&Error{Op: "commit", Message: -1, Errno: unix.ENOMEM}, `commit: cannot allocate memory`},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %s, want %s", got, tc.want)
		}
		wrapped := fmt.Errorf("sync table inet nftguard: %w", tc.err)
		var e *Error
		if !errors.As(wrapped, &e) || e != tc.err || !errors.Is(wrapped, tc.err.Errno) {
			t.Errorf("%v: not found through wrapping", tc.err)
		}
		if IsNotFound(wrapped) != (tc.err.Errno == unix.ENOENT) || IsAlreadyExists(wrapped) != (tc.err.Errno == unix.EEXIST) {
			t.Errorf("%v: predicates %v %v", tc.err, IsNotFound(wrapped), IsAlreadyExists(wrapped))
		}
	}
	// A bare errno is not a refusal the engine mapped to a message.
	if IsNotFound(unix.ENOENT) || IsAlreadyExists(fmt.Errorf("x: %w", unix.EEXIST)) {
		t.Error("a bare errno passes for an engine Error")
	}
}

// TestFakeRefusalIsTyped: the Fake refuses a jump to a missing chain with
// the Error the kernel's refusal gives, in the same words.
func TestFakeRefusalIsTyped(t *testing.T) {
	f, err := NewFake(Table{Name: "nftguard"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Sync(context.Background(), checkTable("jump nope"))
	var e *Error
	if !errors.As(err, &e) || !IsNotFound(err) || e.Op != "add rule to chain" || e.Object != "pods" || e.Index != 2 || e.Text != "jump nope" {
		t.Fatalf("Fake refusal %v (%+v), want a typed not-found naming the rule", err, e)
	}
	if want := `sync table inet nftguard: add rule to chain "pods" (rule 2: "jump nope"): no such file or directory`; err.Error() != want {
		t.Fatalf("Fake refusal %q, want %q", err, want)
	}
}

// TestErrorNamesTheKernelsMessage: against the real kernel, Sync and Check
// refuse with an Error whose Message is the position of the refused
// message in the batch that was sent, and whose fields name the object.
func TestErrorNamesTheKernelsMessage(t *testing.T) {
	ns := testns.New(t, "engtyped")
	ctx := context.Background()
	var mu sync.Mutex
	var last []byte
	e := newTestEngine(t, ns, withSendHook(func(b []byte) {
		mu.Lock()
		last = append(last[:0], b...)
		mu.Unlock()
	}))
	// The message at index i of the last batch sent (after BATCH_BEGIN).
	sent := func(i int) nfnl.Msg {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		msgs, err := nfnl.ParseMsgs(last, nil)
		if err != nil || i+1 >= len(msgs) {
			t.Fatalf("message %d of a batch of %d: %v", i, len(msgs), err)
		}
		return msgs[i+1]
	}
	chainOf := func(m nfnl.Msg) string {
		var chain string
		nfnl.WalkAttrs(m.Data[nfgenHdrLen:], func(typ uint16, data []byte) {
			if typ == unix.NFTA_RULE_CHAIN {
				chain = nfnl.CStr(data)
			}
		})
		return chain
	}

	// The first Sync (a whole table) and, after it, an incremental Check
	// and Sync: each refuses the jump.
	for i, step := range []func() error{
		func() error { _, err := e.Sync(ctx, checkTable("jump nope")); return err },
		func() error { return e.Check(ctx, checkTable("jump nope")) },
		func() error { _, err := e.Sync(ctx, checkTable("jump nope")); return err },
	} {
		if i == 1 {
			if _, err := e.Sync(ctx, checkTable("")); err != nil {
				t.Fatal(err)
			}
		}
		err := step()
		var ke *Error
		if !errors.As(err, &ke) || !IsNotFound(err) {
			t.Fatalf("step %d: %v, want a typed not-found refusal", i, err)
		}
		if ke.Op != "add rule to chain" || ke.Object != "pods" || ke.Index != 2 || ke.Text != "jump nope" || ke.More != 0 {
			t.Fatalf("step %d: %+v, want the jump (rule 2 of pods)", i, ke)
		}
		m := sent(ke.Message)
		if m.Type != nfnl.MsgType(unix.NFT_MSG_NEWRULE) || chainOf(m) != "pods" {
			t.Fatalf("step %d: message %d of the batch is type %#x for chain %q, want the new rule in pods", i, ke.Message, m.Type, chainOf(m))
		}
		if !strings.HasPrefix(err.Error(), "sync table inet nftguard: ") && !strings.HasPrefix(err.Error(), "check table inet nftguard: ") {
			t.Fatalf("step %d: %v does not name the table", i, err)
		}
	}

}
