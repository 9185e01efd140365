package stream

import "testing"

// TestSequencesRememberTheRecentlySettled: a sequence being worked on is
// refused a second worker; once settled it is remembered among the last
// recentlySettled, and the oldest is forgotten first.
func TestSequencesRememberTheRecentlySettled(t *testing.T) {
	s := newSequences()
	if ok, settled := s.begin(1); !ok || settled {
		t.Fatalf("begin(1) = %v, %v; want a first, unsettled start", ok, settled)
	}
	if ok, _ := s.begin(1); ok {
		t.Fatal("a second worker was let on sequence 1")
	}
	s.end(1)
	if ok, settled := s.begin(1); !ok || !settled {
		t.Fatalf("begin(1) after it was settled = %v, %v; want it remembered", ok, settled)
	}
	s.end(1) // settled twice, remembered once
	for seq := uint64(2); seq <= recentlySettled; seq++ {
		s.begin(seq)
		s.end(seq)
	}
	if _, settled := s.begin(1); !settled {
		t.Fatal("sequence 1 forgotten while it was among the last settled")
	}
	s.end(1)
	s.begin(recentlySettled + 1)
	s.end(recentlySettled + 1)
	if _, settled := s.begin(1); settled {
		t.Fatal("the oldest settled sequence was not forgotten")
	}
	if _, settled := s.begin(2); !settled {
		t.Fatal("sequence 2 was forgotten before the oldest")
	}
	if len(s.settled) != recentlySettled {
		t.Fatalf("%d sequences remembered, want %d", len(s.settled), recentlySettled)
	}
}
