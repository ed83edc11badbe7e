package nftsyntax

import "github.com/google/nftables/expr"

type (
	lookupT      = expr.Lookup
	nftablesExpr = expr.Any
)
