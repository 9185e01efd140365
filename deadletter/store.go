package deadletter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/samber/lo"

	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/wire"
)

// ErrNotFound is returned for a dead-letter sequence that the stream does
// not hold (never stored, replayed, purged or aged out).
var ErrNotFound = errors.New("deadletter: no such dead letter")

// Reasons lists every dead-letter reason, in the order of docs/failures.md.
func Reasons() []Reason {
	return []Reason{ReasonBadRequest, ReasonBadReplySubject, ReasonTooLarge, ReasonExpired, ReasonPoison, ReasonInvalidOutput}
}

// ParseReason checks that s names a dead-letter reason.
func ParseReason(s string) (Reason, error) {
	if r := Reason(s); slices.Contains(Reasons(), r) {
		return r, nil
	}
	return "", fmt.Errorf("deadletter: unknown reason %q (want one of %s)", s, ReasonNames())
}

// ReasonNames is Reasons, comma-separated: "bad_request, bad_reply_subject, …".
func ReasonNames() string {
	return strings.Join(lo.Map(Reasons(), func(r Reason, _ int) string { return string(r) }), ", ")
}

// Filter selects dead letters; the zero Filter selects all of them.
type Filter struct {
	// Chain, when set, selects the dead letters of one chain.
	Chain string
	// Reason, when set, selects the dead letters of one reason.
	Reason Reason
}

// Check reports a chain that is no chain name (config.ValidName: a wildcard
// or a dot would select other dead letters) or an unknown reason.
func (f Filter) Check() error {
	if f.Chain != "" && !config.ValidName(f.Chain) {
		return fmt.Errorf("chain %q is not a chain name ([A-Za-z0-9_-]+, at most %d characters)", f.Chain, config.MaxNameLen)
	}
	if f.Reason != "" {
		if _, err := ParseReason(string(f.Reason)); err != nil {
			return err
		}
	}
	return nil
}

func (f Filter) subject() string {
	if f.Chain != "" {
		return wire.DeadLetterSubject(f.Chain)
	}
	return wire.DeadLetterPrefix + ">"
}

func (f Filter) match(e Entry) bool {
	return (f.Chain == "" || e.Chain == f.Chain) && (f.Reason == "" || e.Reason == f.Reason)
}

// Entry sums up one stored dead letter for a listing.
type Entry struct {
	// Seq is the dead letter's sequence in DETOUR_DEADLETTER.
	Seq    uint64    `json:"seq"`
	Time   time.Time `json:"time"` // when it was stored
	Chain  string    `json:"chain"`
	Reason Reason    `json:"reason"`
	// RequestID is the request's id (wire.RequestID), read best effort.
	RequestID  string `json:"id"`
	Error      string `json:"error,omitempty"`
	Deliveries uint64 `json:"deliveries"`
	SourceSeq  uint64 `json:"source_seq"` // in DETOUR_REQUESTS
	Size       int    `json:"size"`       // of the body, in bytes
}

// Message is one stored dead letter in full, Detour-DLQ-* headers included.
type Message struct {
	Entry
	Header nats.Header `json:"header"`
	Data   []byte      `json:"-"`
}

func newMessage(seq uint64, stored time.Time, subject string, header nats.Header, data []byte) Message {
	e := Entry{
		Seq:    seq,
		Time:   stored.UTC(),
		Chain:  strings.TrimPrefix(subject, wire.DeadLetterPrefix),
		Reason: Reason(header.Get(HeaderReason)),
		Error:  header.Get(HeaderError),
		Size:   len(data),
	}
	e.Deliveries, _ = strconv.ParseUint(header.Get(HeaderDeliveries), 10, 64)
	e.SourceSeq, _ = strconv.ParseUint(header.Get(HeaderSourceSeq), 10, 64)
	e.RequestID = wire.RequestID(readFields(data, header).ID, header.Get(HeaderOriginalMsgID), e.SourceSeq)
	return Message{Entry: e, Header: header, Data: data}
}

// Store reads, replays and removes the dead letters in DETOUR_DEADLETTER.
type Store struct{ js jetstream.JetStream }

// NewStore returns a Store on js; a processor creates the stream.
func NewStore(js jetstream.JetStream) *Store { return &Store{js: js} }

func (s *Store) stream(ctx context.Context) (jetstream.Stream, error) {
	str, err := s.js.Stream(ctx, wire.DeadLetterStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("deadletter: stream %s not found (has a processor run on this server?): %w", wire.DeadLetterStream, err)
	}
	if err != nil {
		return nil, fmt.Errorf("deadletter: opening %s: %w", wire.DeadLetterStream, err)
	}
	return str, nil
}

// List returns the dead letters f selects, oldest first.
func (s *Store) List(ctx context.Context, f Filter) ([]Entry, error) {
	var out []Entry
	err := s.each(ctx, f, func(m Message) error {
		out = append(out, m.Entry)
		return nil
	})
	return out, err
}

// Get returns the dead letter with sequence seq, or an error wrapping
// ErrNotFound.
func (s *Store) Get(ctx context.Context, seq uint64) (Message, error) {
	str, err := s.stream(ctx)
	if err != nil {
		return Message{}, err
	}
	raw, err := str.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Message{}, fmt.Errorf("%w: %d", ErrNotFound, seq)
	}
	if err != nil {
		return Message{}, fmt.Errorf("deadletter: reading dead letter %d: %w", seq, err)
	}
	return newMessage(raw.Sequence, raw.Time, raw.Subject, raw.Header, raw.Data), nil
}

func deleteMsg(ctx context.Context, str jetstream.Stream, seq uint64) error {
	err := str.DeleteMsg(ctx, seq)
	if err != nil {
		// The server reports a missing message as a generic failure.
		if _, getErr := str.GetMsg(ctx, seq); errors.Is(getErr, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("%w: %d", ErrNotFound, seq)
		}
		return fmt.Errorf("deadletter: removing dead letter %d: %w", seq, err)
	}
	return nil
}

// Purge removes the dead letters f selects, stored before it started, and
// returns how many.
func (s *Store) Purge(ctx context.Context, f Filter) (int, error) {
	if err := f.Check(); err != nil {
		return 0, err
	}
	str, err := s.stream(ctx)
	if err != nil {
		return 0, err
	}
	if f.Reason == "" {
		// One purge request, up to the last sequence counted.
		n, last, err := count(ctx, str, f)
		if err != nil || n == 0 {
			return 0, err
		}
		opts := []jetstream.StreamPurgeOpt{jetstream.WithPurgeSequence(last + 1)}
		if f.Chain != "" {
			opts = append(opts, jetstream.WithPurgeSubject(f.subject()))
		}
		if err := str.Purge(ctx, opts...); err != nil {
			return 0, fmt.Errorf("deadletter: purging %s: %w", wire.DeadLetterStream, err)
		}
		return int(n), nil
	}
	// The server cannot filter on a header: one by one.
	entries, err := s.List(ctx, f)
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, e := range entries {
		err := deleteMsg(ctx, str, e.Seq)
		switch {
		case errors.Is(err, ErrNotFound): // removed meanwhile by someone else
		case err != nil:
			return removed, err
		default:
			removed++
		}
	}
	return removed, nil
}

// Selection names the dead letters a replay or purge acts on: Seqs in that
// order, when there are any, else those Filter selects.
type Selection struct {
	Seqs   []uint64
	Filter Filter
}

func (sel Selection) validate() error {
	if len(sel.Seqs) > 0 && sel.Filter != (Filter{}) {
		return errors.New("deadletter: name sequences or a filter, not both")
	}
	return nil
}

// PurgeSelected removes the dead letters sel names and returns how many. A
// named one that cannot be removed (ErrNotFound) does not stop the others;
// the errors are joined. Without sequences it is Purge.
func (s *Store) PurgeSelected(ctx context.Context, sel Selection) (int, error) {
	if err := sel.validate(); err != nil {
		return 0, err
	}
	if len(sel.Seqs) == 0 {
		return s.Purge(ctx, sel.Filter)
	}
	str, err := s.stream(ctx)
	if err != nil {
		return 0, err
	}
	removed := 0
	err = eachSeq(ctx, sel.Seqs, func(seq uint64) error {
		err := deleteMsg(ctx, str, seq)
		if err == nil {
			removed++
		}
		return err
	})
	return removed, err
}

// eachSeq runs do for each of seqs until ctx ends, past failures, and
// returns them and ctx's error joined.
func eachSeq(ctx context.Context, seqs []uint64, do func(seq uint64) error) error {
	var errs []error
	for _, seq := range seqs {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if err := do(seq); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// count returns how many dead letters f's subject holds, and the last
// sequence.
func count(ctx context.Context, str jetstream.Stream, f Filter) (n, last uint64, err error) {
	info, err := str.Info(ctx, jetstream.WithSubjectFilter(f.subject()))
	if err != nil {
		return 0, 0, fmt.Errorf("deadletter: reading %s info: %w", wire.DeadLetterStream, err)
	}
	for _, c := range info.State.Subjects {
		n += c
	}
	return n, info.State.LastSeq, nil
}

// When the server sends nothing for idleTimeout before a listing's end, the
// stream is asked (within askTimeout) whether the rest is still there. A
// listing still short after idleStalls such waits fails rather than end
// short: replay -all and purge -reason would report success for a part.
var idleTimeout = 5 * time.Second

const (
	idleStalls = 3
	askTimeout = 5 * time.Second
)

// each calls fn with every dead letter f selects, oldest first, through an
// ordered consumer.
func (s *Store) each(ctx context.Context, f Filter, fn func(Message) error) error {
	if err := f.Check(); err != nil {
		return err
	}
	str, err := s.stream(ctx)
	if err != nil {
		return err
	}
	n, last, err := count(ctx, str, f)
	if err != nil || n == 0 {
		return err
	}
	cons, err := str.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{f.subject()}})
	if err != nil {
		return fmt.Errorf("deadletter: reading %s: %w", wire.DeadLetterStream, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(256))
	if err != nil {
		return fmt.Errorf("deadletter: reading %s: %w", wire.DeadLetterStream, err)
	}
	defer it.Stop()
	var seq uint64 // the last read
	for stalls := 0; ; {
		msg, err := nextMsg(ctx, it)
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			more, err := remaining(ctx, str, f, seq+1, last)
			switch {
			case err != nil:
				return fmt.Errorf("deadletter: reading %s: the server sent nothing for %s after sequence %d: %w", wire.DeadLetterStream, idleTimeout, seq, err)
			case !more:
				return nil // the rest was removed while we read
			}
			if stalls++; stalls == idleStalls {
				return fmt.Errorf("deadletter: reading %s: the server sent nothing for %s after sequence %d, though dead letters up to %d remain",
					wire.DeadLetterStream, idleStalls*idleTimeout, seq, last)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("deadletter: reading %s: %w", wire.DeadLetterStream, err)
		}
		stalls = 0
		meta, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("deadletter: reading %s: %w", wire.DeadLetterStream, err)
		}
		seq = meta.Sequence.Stream
		if seq > last {
			return nil // stored after the listing began
		}
		m := newMessage(seq, meta.Timestamp, msg.Subject(), msg.Headers(), msg.Data())
		if f.match(m.Entry) {
			if err := fn(m); err != nil {
				return err
			}
		}
		if meta.NumPending == 0 || seq == last {
			return nil
		}
	}
}

// remaining reports whether f's subject holds a dead letter from..last.
func remaining(ctx context.Context, str jetstream.Stream, f Filter, from, last uint64) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	m, err := str.GetMsg(ctx, from, jetstream.WithGetMsgSubject(f.subject()))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return m.Sequence <= last, nil
}

func nextMsg(ctx context.Context, it jetstream.MessagesContext) (jetstream.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, idleTimeout)
	defer cancel()
	return it.Next(jetstream.NextContext(ctx))
}
