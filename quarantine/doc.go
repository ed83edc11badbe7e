// Package quarantine finds the API objects the kernel refuses and holds
// them back, so that no single object stops enforcement for the others.
// The compilers check what they can, but the kernel has the last word;
// when it refuses a sync's batch, the agent's sync loop asks Search which
// objects it refuses, syncs the rest (Found.In) and then Holds them:
//
//   - Suspects are the NetworkPolicies, ClusterNetworkPolicies and Services
//     that are new or changed since the last successful sync (Accepted):
//     the kernel accepted all the others together. NetworkPolicies and
//     Services are what tenants write freely; ClusterNetworkPolicies are
//     written by administrators, but the kernel may refuse them all the
//     same, and one must not stop the sync of everything else. Pods,
//     Namespaces and Nodes reach the table only through structure the
//     compilers generate, and holding a pod back would take away its
//     isolation, so they are never suspects: a refusal the suspects do
//     not explain stays a failed sync (Search returns the sync's error).
//   - The search sends only check-only batches, through a Checker (the
//     caller compiles, engine.Engine.Check validates): the kernel changes
//     nothing, so the node is enforced exactly as before while it runs.
//     Only the caller's final Sync changes the table. Group testing by
//     halves costs about 2·k·log2(n) checks for k refused objects among n
//     suspects.
//   - A held object that the last successful sync included keeps that
//     version in the table: an error never leaves a node more open than
//     before it. Dropping it instead would remove the isolation its old
//     version gave. A held object that is new is left out; it was never
//     enforced.
//   - A held object is tried again when its content changes (the owner
//     fixed it) or when it is deleted (Apply, before every compile).
//   - Why an object is held is read from the engine's typed refusal
//     (engine.Error: the operation and the chain or set it names), never
//     parsed out of the error's text.
//
// The package holds no goroutine and no lock: one sync loop owns a
// Quarantine.
//
//	quarantine.go  Key, Quarantine: what the last sync accepted, what is held
//	               (Apply, Accepted, Hold, Held, Problems) and the reverting of
//	               held objects to their accepted versions
//	search.go      Checker, Found and Search: the group-testing search over the
//	               suspects with check-only batches
//
// Tests run the search over an in-memory engine that refuses marked
// objects (bounded number of checks, last accepted versions kept, release
// on change and deletion, ClusterNetworkPolicies), and against the real
// kernel in a network namespace: one refused policy among 1,000 new ones,
// after which the table equals a sync of the 999 others.
package quarantine
