// Package docmap holds the tests that keep the documentation a newcomer
// reads true: every package with a doc.go names each of its non-test Go
// files in its package comment and maps no file it does not have
// (docmap_test.go), and every relative link of the repository's Markdown
// reaches its file and heading (links_test.go). It has no non-test code;
// the tests walk the repository from its root.
package docmap
