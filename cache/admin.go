package cache

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/samber/lo"

	"github.com/detourhq/detour/config"
)

// ErrNoBucket is returned by Stats and Purge when the bucket does not
// exist: no processor has created it yet.
var ErrNoBucket = errors.New("cache: no bucket " + Bucket + " (no processor has started on this server yet)")

// ErrBadChainName is returned by CheckChainName, Stats and Purge for a
// chain name that no chain file allows.
var ErrBadChainName = fmt.Errorf("cache: a chain name must match [A-Za-z0-9_-]+ and be at most %d characters", config.MaxNameLen)

// CheckChainName reports whether name may select a chain's entries: ""
// (every chain) or a name the chain file allows; anything else (a wildcard,
// a dot) would select other keys or none. The error wraps ErrBadChainName
// and quotes name.
func CheckChainName(name string) error {
	if name == "" || config.ValidName(name) {
		return nil
	}
	return fmt.Errorf("%w, not %q", ErrBadChainName, name)
}

// ChainStats counts the entries of one chain. An entry is fresh before its
// fresh_until, stale until its stale_until, and expired after that until
// the server removes it (about a second later).
type ChainStats struct {
	Chain   string `json:"chain"`
	Entries int    `json:"entries"`
	Fresh   int    `json:"fresh"`
	Stale   int    `json:"stale"`
	Expired int    `json:"expired"`
	// Bytes is the size of the entries' values, in bytes.
	Bytes int64 `json:"bytes"`
}

// Stats counts the entries of chainName ("" for every chain), one row per
// chain in name order, judged at now; an invalid entry, or one of another
// version, counts as expired. It reads every entry once: a command for
// operators. Errors: ErrBadChainName, ErrNoBucket, or the server's.
func Stats(ctx context.Context, js jetstream.JetStream, chainName string, now time.Time) ([]ChainStats, error) {
	if err := CheckChainName(chainName); err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, ErrNoBucket
	}
	if err != nil {
		return nil, fmt.Errorf("cache: opening %s: %w", Bucket, err)
	}
	w, err := kv.WatchFiltered(ctx, []string{keys(chainName)}, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("cache: reading %s: %w", Bucket, err)
	}
	defer func() { _ = w.Stop() }()
	rows := map[string]ChainStats{}
	for {
		var kve jetstream.KeyValueEntry
		select {
		case kve = <-w.Updates():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if kve == nil { // every entry stored now has been seen
			break
		}
		name, _, _ := strings.Cut(kve.Key(), ".")
		row := rows[name]
		row.Chain = name
		row.Entries++
		row.Bytes += int64(len(kve.Value()))
		e, err := DecodeEntry(kve.Value())
		switch {
		case err != nil || !now.Before(e.StaleUntil):
			row.Expired++
		case e.Fresh(now):
			row.Fresh++
		default:
			row.Stale++
		}
		rows[name] = row
	}
	return slices.SortedFunc(maps.Values(rows), func(a, b ChainStats) int { return strings.Compare(a.Chain, b.Chain) }), nil
}

// Purge removes every entry of chainName ("" for every chain) and returns
// how many messages it removed (entries and the markers of expired ones).
// Errors: ErrBadChainName, ErrNoBucket, or the server's.
func Purge(ctx context.Context, js jetstream.JetStream, chainName string) (uint64, error) {
	if err := CheckChainName(chainName); err != nil {
		return 0, err
	}
	stream, err := js.Stream(ctx, kvStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 0, ErrNoBucket
	}
	if err != nil {
		return 0, fmt.Errorf("cache: opening %s: %w", Bucket, err)
	}
	subj := subject(keys(chainName))
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		return 0, fmt.Errorf("cache: counting %s: %w", Bucket, err)
	}
	n := lo.Sum(lo.Values(info.State.Subjects))
	if err := stream.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
		return 0, fmt.Errorf("cache: purging %s: %w", Bucket, err)
	}
	return n, nil
}

// keys is the filter of chainName's keys, every key for "".
func keys(chainName string) string {
	if chainName == "" {
		return ">"
	}
	return chainName + ".>"
}
