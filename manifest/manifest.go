// Package manifest reads Kubernetes manifests (YAML or JSON, several
// documents per file, files or directories) into the typed API objects that
// nftguard's compilers read, for the one-shot commands that run without an
// API server.
package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/nftguard/nftguard/problem"
)

// Objects are the API objects found in the manifests, in file order.
type Objects struct {
	Namespaces      []*corev1.Namespace
	Nodes           []*corev1.Node
	Pods            []*corev1.Pod
	NetworkPolicies []*networkingv1.NetworkPolicy
	Services        []*corev1.Service
	EndpointSlices  []*discoveryv1.EndpointSlice
}

// Load reads every manifest under paths: a file, a directory (its *.yaml,
// *.yml and *.json files, recursively), or "-" for standard input. An
// unreadable path is an error; a document that is not a valid object is a
// Problem and the others are still returned. Kinds nftguard does not use are
// ignored.
func Load(stdin io.Reader, paths ...string) (*Objects, []problem.Problem, error) {
	objs := &Objects{}
	var problems []problem.Problem
	for _, p := range paths {
		files, err := expand(p)
		if err != nil {
			return nil, nil, err
		}
		for _, f := range files {
			var data []byte
			if f == "-" {
				data, err = io.ReadAll(stdin)
			} else {
				data, err = os.ReadFile(f)
			}
			if err != nil {
				return nil, nil, fmt.Errorf("read manifest %s: %w", f, err)
			}
			problems = append(problems, decodeStream(f, data, objs)...)
		}
	}
	return objs, problems, nil
}

func expand(p string) ([]string, error) {
	if p == "-" {
		return []string{p}, nil
	}
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("read manifests: %w", err)
	}
	if !st.IsDir() {
		return []string{p}, nil
	}
	var files []string
	err = filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				files = append(files, path)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read manifests in %s: %w", p, err)
	}
	sort.Strings(files)
	return files, nil
}

type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Items []json.RawMessage `json:"items"`
}

func decodeStream(file string, data []byte, objs *Objects) []problem.Problem {
	var problems []problem.Problem
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for doc := 0; ; doc++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		src := fmt.Sprintf("%s:%d", file, doc+1)
		if err != nil {
			problems = append(problems, problem.Problem{Source: src, Reason: fmt.Sprintf("not valid YAML or JSON: %v", err)})
			break // the decoder cannot resynchronise after a syntax error
		}
		if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
			continue // empty document between separators
		}
		problems = append(problems, decodeObject(src, raw, objs)...)
	}
	return problems
}

func decodeObject(src string, raw json.RawMessage, objs *Objects) []problem.Problem {
	var tm typeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		return []problem.Problem{{Source: src, Reason: fmt.Sprintf("not a Kubernetes object: %v", err)}}
	}
	if tm.Kind == "" || tm.APIVersion == "" {
		return []problem.Problem{{Source: src, Reason: "apiVersion and kind are required"}}
	}
	if strings.HasSuffix(tm.Kind, "List") && tm.APIVersion == "v1" {
		var out []problem.Problem
		for i, item := range tm.Items {
			out = append(out, decodeObject(fmt.Sprintf("%s[%d]", src, i), item, objs)...)
		}
		return out
	}
	ns := tm.Metadata.Namespace
	name := tm.Metadata.Name
	bad := func(reason string) []problem.Problem {
		return []problem.Problem{{Source: src, Reason: reason,
			Object: problem.Object{APIVersion: tm.APIVersion, Kind: tm.Kind, Namespace: ns, Name: name}}}
	}
	if name == "" {
		return bad("metadata.name is required")
	}
	strict := func(into any) error {
		d := json.NewDecoder(bytes.NewReader(raw))
		return d.Decode(into)
	}
	// Namespaced objects without a namespace land in "default", as with kubectl.
	if ns == "" {
		ns = "default"
	}
	switch tm.APIVersion + " " + tm.Kind {
	case "v1 Namespace":
		o := &corev1.Namespace{}
		if err := strict(o); err != nil {
			return bad(err.Error())
		}
		objs.Namespaces = append(objs.Namespaces, o)
	case "v1 Node":
		o := &corev1.Node{}
		if err := strict(o); err != nil {
			return bad(err.Error())
		}
		objs.Nodes = append(objs.Nodes, o)
	case "v1 Pod":
		o := &corev1.Pod{}
		if err := strict(o); err != nil {
			return bad(err.Error())
		}
		o.Namespace = ns
		objs.Pods = append(objs.Pods, o)
	case "networking.k8s.io/v1 NetworkPolicy":
		o := &networkingv1.NetworkPolicy{}
		if err := strict(o); err != nil {
			return bad(err.Error())
		}
		o.Namespace = ns
		objs.NetworkPolicies = append(objs.NetworkPolicies, o)
	case "v1 Service":
		o := &corev1.Service{}
		if err := strict(o); err != nil {
			return bad(err.Error())
		}
		o.Namespace = ns
		objs.Services = append(objs.Services, o)
	case "discovery.k8s.io/v1 EndpointSlice":
		o := &discoveryv1.EndpointSlice{}
		if err := strict(o); err != nil {
			return bad(err.Error())
		}
		o.Namespace = ns
		objs.EndpointSlices = append(objs.EndpointSlices, o)
	}
	return nil
}
