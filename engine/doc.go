// Package engine keeps one nftables table in the kernel equal to a desired
// state: it reads back its own table over netlink, computes the difference,
// and applies it as one atomic nfnetlink transaction, repairing drift that
// others cause. It never writes anything outside its table.
//
// A Sync flows through the files in this order:
//
//	model.go       the caller's view: Table (inet only), Desired (chains, rules, sets, elements), Interface
//	validate.go    names, types and comments refused before anything is sent (nft must read them back)
//	engine.go      Engine, New, Sync, Delete: the retry loop around one sync
//	compiler.go    Desired -> kernel form, recompiling only what the caller changed
//	kernelform.go  the kernel form both sides are diffed in (kernelTable, kernelChain, ...)
//	rulekey.go     the canonical key two rules are compared by
//	setform.go     set declarations and element identities in kernel form
//	read.go        dumps our table back into kernel form
//	list.go        List: any table of a namespace, read-only, through read.go's decoders (for doctor)
//	startup.go     whether the table found at start-up can be diffed or must be replaced
//	diff.go        kernel form (now) + kernel form (wanted) -> batch operations
//	batch.go       the operations encoded as one nfnetlink transaction
//	commit.go      sends a batch and maps the kernel's answers back to operations
//	errors.go      Error: a refusal as the message and object it names; IsNotFound, IsAlreadyExists
//	check.go       Check: the same batch without its end, so the kernel validates and changes nothing
//	monitor.go     nftables events -> drift (a resync)
//	counters.go    Counters: the rules' counter values, read on demand, never diffed;
//	               WithDeletedCounters: the final values of the rules a Sync deletes
//	timed.go       AddTimed, ReadTimed: timeout sets' dynamic elements, outside Sync, on a socket of their own
//	nlmsg.go       nf_tables constants; the codec, socket and requests are internal/nfnl
//	render.go      Desired as an nft script; fake.go, the in-memory Interface
//
// Rule text is compiled by engine/nftsyntax into the expressions nft
// writes; engine/nftwire encodes those (and elements, user data) for the
// kernel.
package engine
