package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	yamlv2 "go.yaml.in/yaml/v2"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/nftguard/nftguard/internal/parallel"
	"github.com/nftguard/nftguard/problem"
)

// file reads one file's documents: a JSON stream when it starts with "{",
// YAML documents separated by "---" lines otherwise.
func (r *reader) file(name string, data []byte) {
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		values, err := scanStream(data)
		for i, v := range values {
			r.document(docSource(name, i+1), data, v)
		}
		if err != nil {
			// A JSON stream cannot be resynchronised after a syntax error.
			r.bad(problem.Problem{Source: docSource(name, len(values)+1), Reason: fmt.Sprintf("not valid JSON: %v", err)})
		}
		return
	}
	// YAML: the documents are split on "---" lines first, then converted
	// to JSON on every processor (the conversion is most of the cost of
	// reading YAML, and each document's is independent), then read in
	// order.
	var chunks [][]byte
	var readErr error
	yr := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		chunk, err := yr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			readErr = err
			break
		}
		chunks = append(chunks, chunk)
	}
	converted := make([]yamlDoc, len(chunks))
	parallel.For(parallel.Workers(len(chunks), 1, 0), len(chunks), 1, func(_, i int) { converted[i] = convertYAML(chunks[i]) })
	for i, c := range converted {
		src := docSource(name, i+1)
		switch {
		case c.bad != nil:
			c.bad.Source = src
			r.bad(*c.bad)
		case c.ok:
			r.document(src, c.json, c.v)
		}
	}
	if readErr != nil {
		r.bad(problem.Problem{Source: docSource(name, len(chunks)+1), Reason: fmt.Sprintf("not valid YAML: %v", readErr)})
	}
}

// yamlDoc is one YAML document converted to JSON and scanned, or why it
// could not be.
type yamlDoc struct {
	json []byte
	v    value
	ok   bool // false: an empty document (or only comments)
	bad  *problem.Problem
}

// convertYAML converts one YAML document to JSON and scans it. It is pure,
// so documents are converted in parallel.
func convertYAML(chunk []byte) yamlDoc {
	if why := expandedTooMuch(chunk); why != "" {
		return yamlDoc{bad: &problem.Problem{Reason: why}}
	}
	// Strict: a key given twice in a mapping is an error, as the YAML
	// specification says (the lenient conversion keeps one silently).
	j, err := yaml.YAMLToJSONStrict(chunk)
	if err != nil {
		p := problem.Problem{Reason: fmt.Sprintf("not valid YAML: %s", oneLine(err.Error()))}
		if path, ok := duplicateKey(chunk); ok {
			p.Field, p.Reason = path, "duplicate field"
		}
		// Documents are split on "---" lines before they are parsed, so
		// the next one can still be checked and reported.
		return yamlDoc{bad: &p}
	}
	v, ok, err := scanOne(j)
	if err != nil {
		// The converter writes JSON; this would be its bug.
		return yamlDoc{bad: &problem.Problem{Reason: fmt.Sprintf("not valid YAML: converted to invalid JSON: %v", err)}}
	}
	return yamlDoc{json: j, v: v, ok: ok}
}

func docSource(file string, doc int) string { return file + ":" + strconv.Itoa(doc) }

// duplicateKey finds the first key given twice in a mapping of a YAML
// document and returns its path (spec.ingress[0].from), for the message:
// the strict parser's error only has a line number.
func duplicateKey(doc []byte) (string, bool) {
	var root yamlv2.MapSlice
	if err := yamlv2.Unmarshal(doc, &root); err != nil {
		return "", false
	}
	return findDuplicate(root, "")
}

func findDuplicate(v any, path string) (string, bool) {
	switch v := v.(type) {
	case yamlv2.MapSlice:
		seen := map[string]bool{}
		for _, item := range v {
			k := fmt.Sprint(item.Key)
			p := k
			if path != "" {
				p = path + "." + k
			}
			if seen[k] {
				return p, true
			}
			seen[k] = true
			if d, ok := findDuplicate(item.Value, p); ok {
				return d, true
			}
		}
	case []any:
		for i, item := range v {
			if d, ok := findDuplicate(item, fmt.Sprintf("%s[%d]", path, i)); ok {
				return d, true
			}
		}
	}
	return "", false
}
