package nftsafe

import (
	"github.com/nftguard/nftguard/engine"
	"github.com/nftguard/nftguard/internal/nftcheck"
)

// Check is nftcheck.Check, for the compilers' tests not yet moved to it.
//
// Deprecated: use internal/nftcheck.Check; this forwarder is the last
// import that ties nftsafe to the engine.
func Check(d *engine.Desired) []error { return nftcheck.Check(d) }
