// Package docmap holds one test: every package with a doc.go names each of
// its non-test Go files in its package comment, so the file map a newcomer
// reads there is never out of date. It has no non-test code; the test
// (docmap_test.go) walks the repository from its root.
package docmap
