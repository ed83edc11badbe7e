// Package npset holds a cluster's NetworkPolicies grouped by namespace in
// an immutable Set, as the policy compiler reads them: an nsgroup.Set of
// policies.
//
// A NetworkPolicy selects pods of its own namespace only, so a policy event
// touches one namespace. Replacing the policies of some namespaces gives a
// new Set that shares every other Group with the old one: a compiler that
// remembers the Groups it saw tells, by identity and without looking at a
// policy, which namespaces changed. An event then costs its namespace, not
// the cluster's 10,000 policies.
//
//	set.go  Set and Group (an nsgroup.Set of policies): New, Update and Replace build a Set, sharing
//	        unchanged Groups
package npset
