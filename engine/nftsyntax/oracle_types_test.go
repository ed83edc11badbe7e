package nftsyntax

import "github.com/nftguard/nftguard/engine/nftwire"

type (
	lookupT      = nftwire.Lookup
	nftablesExpr = nftwire.Expr
)
