package stream

import "sync"

// recentlySettled is how many of the requests a processor settled last it
// remembers by stream sequence (about 200 KB).
const recentlySettled = 4096

// sequences knows which requests, by stream sequence, this processor's
// workers are on, and which they settled recently.
//
// A consumer deleted and made again (by an operator, or by a processor
// repairing it) hands out every request not acked to it as a first
// delivery, NumDelivered 1, and ignores the acks of deliveries it has not
// made: those of requests answered meanwhile, too. Such a delivery of a
// request a worker here is on is handed back; one of a request settled
// here recently is checked for its answer, as a redelivery is, so that no
// provider is paid twice. A delivery whose sequence is remembered only
// because a recreated requests stream gave it out again costs that check
// and no more: a result names the request message it answers.
type sequences struct {
	mu      sync.Mutex
	working map[uint64]struct{}
	// settled maps a sequence to its latest place in ring, the settled
	// sequences in order, the oldest replaced first.
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

// end marks the request at seq as no longer worked on, and remembers it as
// the most recently settled, forgetting the oldest. A request settled again
// (handed back, then answered) is remembered from its latest settling.
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
