package engine

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Error is the kernel's refusal of a batch, mapped back to the message it
// refused first and to the object that message acts on. Sync and Check
// return it wrapped with the table's name; a caller that must know which
// object the kernel refused (the agent's quarantine) reads it with
// errors.As instead of parsing the text, and a caller that asks why uses
// the predicates (IsNotFound, IsAlreadyExists) or errors.Is on the errno.
type Error struct {
	// Op is what the refused message does: "add rule to chain", "add
	// set", "delete chain", "add elements to set", ...; "commit" when
	// the kernel's answer names no message of the batch.
	Op string
	// Object is the chain or set the message acts on, "" for the table
	// itself and for a commit.
	Object string
	// Index is the rule's number in its chain (1-based) for a rule, or
	// the first element's number for elements; 0 when neither applies.
	Index int
	// Count is the number of elements the message carries (0 for
	// anything but elements).
	Count int
	// Text is the rule's text, or the first element's, when known.
	Text string
	// Message is the position of the refused message in the batch,
	// counted from 0 after NFNL_MSG_BATCH_BEGIN; -1 when the error
	// names no message (a commit; the Fake, which sends none).
	Message int
	// Errno is the kernel's answer, e.g. ENOENT for a jump to a chain
	// that does not exist.
	Errno unix.Errno
	// More counts the batch's other refused messages: the kernel reports
	// every one, the first (lowest sequence number) is described.
	More int
}

// newError describes the refusal of message index of a batch, d its
// operation.
func newError(d opDesc, index int, errno unix.Errno) *Error {
	return &Error{Op: d.verb, Object: d.name, Index: d.index, Count: d.count, Text: d.text, Message: index, Errno: errno}
}

// Error says what was refused and why, naming the object: `add rule to
// chain "c" (rule 2: "jump x"): no such file or directory`.
func (e *Error) Error() string {
	d := opDesc{verb: e.Op, name: e.Object, index: e.Index, count: e.Count, text: e.Text}
	s := fmt.Sprintf("%s: %v", d, e.Errno)
	if e.More > 0 {
		s += fmt.Sprintf(" (and %d more failing operations)", e.More)
	}
	return s
}

// Unwrap returns the errno, so errors.Is(err, unix.EBUSY) sees it.
func (e *Error) Unwrap() error { return e.Errno }

// IsNotFound reports whether err is a kernel refusal because an object a
// message names does not exist: a jump or verdict-map entry to a missing
// chain, a lookup in a missing set, a delete of something already gone.
func IsNotFound(err error) bool { return isErrno(err, unix.ENOENT) }

// IsAlreadyExists reports whether err is a kernel refusal because what a
// message adds is already there: an object created twice, or interval
// elements that overlap ones the set holds.
func IsAlreadyExists(err error) bool { return isErrno(err, unix.EEXIST) }

func isErrno(err error, errno unix.Errno) bool {
	var e *Error
	return errors.As(err, &e) && e.Errno == errno
}
