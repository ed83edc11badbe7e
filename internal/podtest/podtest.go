// Package podtest lets tests keep writing pods as API objects while the
// compilers take podset records: Set converts a list the way the agent's
// caches would, giving the same object the same record every time, so
// incremental compilers see unchanged pods as unchanged.
package podtest

import (
	"runtime"
	"sync"
	"weak"

	corev1 "k8s.io/api/core/v1"

	"github.com/nftguard/nftguard/podset"
)

// The records of live objects, and the lists Sets were made from. Entries
// go with their object (weak keys and a cleanup), so a long random test
// does not keep what it made.
var (
	mu      sync.Mutex
	records = map[weak.Pointer[corev1.Pod]]*podset.Pod{}
	lists   = map[weak.Pointer[podset.Set]][]*corev1.Pod{}
)

// Record is the record of an object: the same for the same object.
func Record(o *corev1.Pod) *podset.Pod {
	k := weak.Make(o)
	mu.Lock()
	defer mu.Unlock()
	if r, ok := records[k]; ok {
		return r
	}
	r := podset.FromAPI(o)
	records[k] = r
	runtime.AddCleanup(o, forget, k)
	return r
}

func forget(k weak.Pointer[corev1.Pod]) {
	mu.Lock()
	defer mu.Unlock()
	delete(records, k)
}

// Set groups list's records (see Record); List gives list back.
func Set(list []*corev1.Pod) *podset.Set {
	recs := make([]*podset.Pod, len(list))
	for i, o := range list {
		recs[i] = Record(o)
	}
	s := podset.NewSet(recs)
	k := weak.Make(s)
	mu.Lock()
	lists[k] = list
	mu.Unlock()
	runtime.AddCleanup(s, func(k weak.Pointer[podset.Set]) {
		mu.Lock()
		defer mu.Unlock()
		delete(lists, k)
	}, k)
	return s
}

// List is the list a Set was made from by Set, in its order; nil for a
// Set made otherwise.
func List(s *podset.Set) []*corev1.Pod {
	if s == nil {
		return nil
	}
	mu.Lock()
	defer mu.Unlock()
	return lists[weak.Make(s)]
}

// Append is Set of s's list and ps; for building small test clusters.
func Append(s *podset.Set, ps ...*corev1.Pod) *podset.Set {
	return Set(append(append([]*corev1.Pod(nil), List(s)...), ps...))
}
