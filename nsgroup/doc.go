// Package nsgroup holds namespaced objects grouped by namespace in an
// immutable Set: the one implementation behind podset's pods and npset's
// NetworkPolicies.
//
// A compiler's input changes a namespace at a time: a pod or policy event
// touches its own namespace. Replacing the objects of some namespaces gives
// a new Set that shares every other Group with the old one, so a compiler
// that remembers the Groups it saw tells, by identity and without looking
// at an object, which namespaces changed. An event then costs the
// namespaces it touched, not the cluster's 150,000 pods or 10,000
// policies.
//
// Files:
//
//	set.go  Set, Group, New, Replace, Update, WithGroups, and Group.Filter's
//	        kept answer
package nsgroup
