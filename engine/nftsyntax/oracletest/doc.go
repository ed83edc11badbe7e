// Package oracletest holds kernel oracle tests for named sets and maps
// (docs/design.md, principle 3: write what nft writes) that need both the
// engine and nftsyntax: the engine imports nftsyntax, so these tests
// cannot live in package nftsyntax without an import cycle.
//
// Each test writes sets through the engine into one network namespace,
// declares the same sets with `nft -f` in another, and compares what the
// kernel holds (raw NFT_MSG_GETSET / NFT_MSG_GETSETELEM dumps, byte for
// byte) and what nft prints (`nft list set`, `nft --debug=netlink list set`).
// Elements dumped from the kernel are also decoded with
// nftsyntax.DecodeElements and compared with nft's canonical listing.
//
// The package has no non-test code.
package oracletest
