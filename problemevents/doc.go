// Package problemevents writes each problem the agent finds with an API
// object (left out of the table, held back by the kernel, over its budget,
// not fully applied) once per cluster as a Kubernetes Warning Event, not
// once per node.
//
// Every node that finds a problem derives the same Event name from it, so
// the first create wins and the others are refused as AlreadyExists, which
// is success. A problem every node finds alike is written only by a few
// nodes (Config.Reporters, DefaultReporters): of the nodes where the
// object takes effect, those ranking highest for it by rendezvous hashing,
// which every agent computes alone from its caches. A problem only one
// node can find names that node in its Event. Events are sent by one
// goroutine (Reporter.Run), so an unreachable API server never delays a
// sync.
//
// The Reporter registers nftguard_events_total{result} on the Registerer
// it is given and counts the ErrorKind values on the errors counter it is
// given (the agent's nftguard_errors_total).
//
// # Where things are
//
//	reporter.go  Reporter: the problems of each compile, the Events' names
//	             and contents, the sender, and the electorate that picks
//	             the reporting nodes
package problemevents
