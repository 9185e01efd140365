package stream

import (
	"errors"
	"strings"
	"testing"
)

// TestHealth follows Health through failures and recoveries: each failing
// part makes Err name it until that part works again, and only a change of
// state is reported as one (so the caller logs an outage once).
func TestHealth(t *testing.T) {
	var h Health
	if err := h.Err(); err != nil {
		t.Fatalf("zero Health: %v", err)
	}
	gone := errors.New("consumer deleted")
	steps := []struct {
		do          func() bool
		wantChanged bool
		wantErr     []string // substrings of Err; none means nil
	}{
		{func() bool { return h.pulled("default", nil) }, false, nil},
		{func() bool { return h.pulled("default", gone) }, true, []string{"chain default", "consumer deleted"}},
		{func() bool { return h.pulled("default", gone) }, false, []string{"chain default"}},
		{func() bool { return h.stored(errors.New("no response from stream")) }, true, []string{"chain default", "storing results"}},
		{func() bool { return h.pulled("default", nil) }, true, []string{"storing results"}},
		{func() bool { return h.stored(errors.New("again")) }, false, []string{"storing results: again"}},
		{func() bool { return h.stored(nil) }, true, nil},
		{func() bool { return h.stored(nil) }, false, nil},
	}
	for i, s := range steps {
		if changed := s.do(); changed != s.wantChanged {
			t.Fatalf("step %d: changed = %v, want %v", i, changed, s.wantChanged)
		}
		err := h.Err()
		if len(s.wantErr) == 0 {
			if err != nil {
				t.Fatalf("step %d: Err() = %v, want nil", i, err)
			}
			continue
		}
		if err == nil {
			t.Fatalf("step %d: Err() = nil, want %q", i, s.wantErr)
		}
		for _, want := range s.wantErr {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("step %d: Err() = %v, want it to say %q", i, err, want)
			}
		}
	}
	var none *Health
	if none.pulled("x", errors.New("x")) || none.stored(errors.New("x")) || none.Err() != nil {
		t.Fatal("a nil Health records something")
	}
}
