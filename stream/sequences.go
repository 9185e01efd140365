package stream

import "sync"

// recentlySettled is how many recently settled requests are remembered
// (about 200 KB).
const recentlySettled = 4096

// sequences knows which requests, by stream sequence, this processor's
// workers are on, and which they settled recently. A consumer made again
// hands out every request not acked to it as a first delivery, and ignores
// the acks of deliveries it did not make: one a worker here is on is handed
// back, one settled here lately is checked for its answer, so that no
// provider is paid twice. A sequence a recreated requests stream reused
// costs that check and no more: a result names the message it answers.
type sequences struct {
	mu      sync.Mutex
	working map[uint64]struct{}
	// settled maps a sequence to its latest place in ring, oldest replaced
	// first.
	settled map[uint64]int
	ring    [recentlySettled]uint64
	next    int
}

func newSequences() *sequences {
	return &sequences{working: map[uint64]struct{}{}, settled: make(map[uint64]int, recentlySettled)}
}

// begin marks the request at seq as being worked on. It reports false when
// a worker already is on it, and whether a worker here settled it lately.
func (s *sequences) begin(seq uint64) (ok, settled bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, on := s.working[seq]; on {
		return false, false
	}
	s.working[seq] = struct{}{}
	_, settled = s.settled[seq]
	return true, settled
}

// end marks the request at seq as settled, the most recent, forgetting the
// oldest.
func (s *sequences) end(seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.working, seq)
	if old := s.ring[s.next]; old != 0 && s.settled[old] == s.next {
		delete(s.settled, old) // not settled again since
	}
	s.ring[s.next] = seq
	s.settled[seq] = s.next
	s.next = (s.next + 1) % recentlySettled
}
