package quarantine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/nftguard/nftguard/compose"
)

// Checker asks the kernel whether it would accept the table compiled from
// an input, changing nothing (engine.Engine.Check behind the caller's
// compiler). The search sends nothing else.
type Checker interface {
	Check(ctx context.Context, in compose.Input) error
}

// Found is the outcome of a search.
type Found struct {
	// In is the input searched with every refused object reverted: its
	// accepted version, or left out when it has none.
	In compose.Input
	// Refused are the objects the kernel refuses, each with the error of
	// the check that showed it.
	Refused map[Key]error
	// Checks is the number of check-only batches the search sent.
	Checks int
}

// Objects names the refused objects, sorted, for logs.
func (f *Found) Objects() string {
	names := make([]string, 0, len(f.Refused))
	for k := range f.Refused {
		names = append(names, k.String())
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// Search is called when the kernel refused the sync of in (held objects
// already reverted by Apply): it finds the suspects the kernel refuses,
// asking chk only. It returns syncErr, extended, when the suspects do not
// explain the refusal, and ctx's error when ctx ends. Nothing is held
// until Hold: the caller syncs f.In first.
func (q *Quarantine) Search(ctx context.Context, in compose.Input, syncErr error, chk Checker) (*Found, error) {
	sus := q.suspects(in)
	if len(sus) == 0 {
		return nil, syncErr
	}
	isSuspect := make(map[Key]bool, len(sus))
	for _, k := range sus {
		isSuspect[k] = true
	}
	f := &Found{Refused: map[Key]error{}}
	include := map[Key]bool{}
	try := func() error {
		f.Checks++
		return chk.Check(ctx, q.revert(in, func(k Key) bool { return isSuspect[k] && !include[k] }))
	}
	if err := try(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w (the kernel also refuses the table without the %d new or changed NetworkPolicies, ClusterNetworkPolicies and Services: %v)", syncErr, len(sus), err)
	}
	// Group testing by halves: a group is added to what is included; if
	// the kernel refuses, it is split. A group known to be refused (its
	// sibling was accepted whole) skips its own check. Cost: about
	// 2·k·log2(n) checks for k refused objects among n suspects.
	var search func(group []Key, knownErr error) (allGood bool, err error)
	search = func(group []Key, knownErr error) (bool, error) {
		refused := knownErr
		if refused == nil {
			for _, k := range group {
				include[k] = true
			}
			err := try()
			if err == nil {
				return true, nil
			}
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			for _, k := range group {
				delete(include, k)
			}
			refused = err
		}
		if len(group) == 1 {
			f.Refused[group[0]] = refused
			return false, nil
		}
		mid := len(group) / 2
		leftGood, err := search(group[:mid], nil)
		if err != nil {
			return false, err
		}
		var rightKnown error
		if leftGood {
			rightKnown = refused
		}
		_, err = search(group[mid:], rightKnown)
		return false, err
	}
	if _, err := search(sus, syncErr); err != nil {
		return nil, err
	}
	f.In = q.revert(in, func(k Key) bool { _, bad := f.Refused[k]; return bad })
	return f, nil
}
