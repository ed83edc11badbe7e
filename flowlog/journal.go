package flowlog

import "sync"

// Journal is a bounded ring of the most recent records, with counts of
// every record added and of those pushed out unread by newer ones. It is
// safe for concurrent use: one goroutine adds while others read.
type Journal struct {
	mu          sync.Mutex
	buf         []Record
	next        int // where the next record goes
	n           int // records held
	records     uint64
	overwritten uint64
}

// NewJournal returns a journal holding at most size records (at least 1).
func NewJournal(size int) *Journal {
	return &Journal{buf: make([]Record, max(size, 1))}
}

// Add keeps r, pushing out the oldest record when the journal is full.
func (j *Journal) Add(r Record) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.records++
	if j.n == len(j.buf) {
		j.overwritten++
	} else {
		j.n++
	}
	j.buf[j.next] = r
	j.next = (j.next + 1) % len(j.buf)
}

// Recent returns the records held, oldest first.
func (j *Journal) Recent() []Record {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]Record, 0, j.n)
	start := (j.next - j.n + len(j.buf)) % len(j.buf)
	for i := range j.n {
		out = append(out, j.buf[(start+i)%len(j.buf)])
	}
	return out
}

// Counts returns how many records were added, and how many of them were
// pushed out of the ring by newer ones.
func (j *Journal) Counts() (records, overwritten uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.records, j.overwritten
}
