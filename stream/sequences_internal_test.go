package stream

import "testing"

// TestSequencesRememberTheRecentlySettled: a sequence being worked on is
// refused a second worker; once settled it is remembered among the last
// recentlySettled settlings, from its latest one, and the oldest is
// forgotten first.
func TestSequencesRememberTheRecentlySettled(t *testing.T) {
	s := newSequences()
	settle := func(seq uint64) {
		t.Helper()
		if ok, _ := s.begin(seq); !ok {
			t.Fatalf("begin(%d) refused", seq)
		}
		s.end(seq)
	}
	if ok, settled := s.begin(1); !ok || settled {
		t.Fatalf("begin(1) = %v, %v; want a first, unsettled start", ok, settled)
	}
	if ok, _ := s.begin(1); ok {
		t.Fatal("a second worker was let on sequence 1")
	}
	s.end(1)
	for seq := uint64(2); seq <= recentlySettled; seq++ {
		settle(seq)
	}
	if ok, settled := s.begin(1); !ok || !settled {
		t.Fatalf("begin(1) = %v, %v; want it remembered among the last %d settled", ok, settled, recentlySettled)
	}
	s.end(1) // settled again: now the latest
	for seq := uint64(recentlySettled + 1); seq <= recentlySettled+100; seq++ {
		settle(seq)
	}
	if _, settled := s.begin(1); !settled {
		t.Fatal("sequence 1 forgotten although it was settled again since")
	}
	if _, settled := s.begin(2); settled {
		t.Fatal("sequence 2, the oldest settled, was not forgotten")
	}
	if _, settled := s.begin(recentlySettled); !settled {
		t.Fatalf("sequence %d forgotten while among the last settled", recentlySettled)
	}
	if len(s.settled) > recentlySettled {
		t.Fatalf("%d sequences remembered, want at most %d", len(s.settled), recentlySettled)
	}
}
