package topology

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/internal/wait"
)

// The KV buckets detour creates (docs/state.md, docs/cache.md).
const (
	// ProviderBucket holds provider state: health, cooldowns, probes and
	// what each processor runs.
	ProviderBucket = "detour_providers"
	// CacheBucket holds the response cache.
	CacheBucket = "detour_cache"
)

// buckets are the buckets' settings beside their names. Both keep one
// revision a key and allow per-key TTLs; the marker of an expired key is
// kept as long as its readers need it: watchers of the provider bucket see
// cooldowns end by it, and nobody watches the cache's, so they should not
// pile up.
var buckets = map[string]struct {
	description string
	markerTTL   time.Duration
}{
	ProviderBucket: {"detour provider health and cooldowns", 5 * time.Minute},
	CacheBucket:    {"detour response cache", time.Second},
}

// OpenBucket creates or updates the bucket name (ProviderBucket or
// CacheBucket) idempotently, with replicas copies (zero means 1), as every
// processor does at start and when one is found gone.
func OpenBucket(ctx context.Context, js jetstream.JetStream, name string, replicas int) (jetstream.KeyValue, error) {
	b, ok := buckets[name]
	if !ok {
		return nil, fmt.Errorf("topology: no bucket %s", name)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:         name,
		Description:    b.description,
		History:        1,
		LimitMarkerTTL: b.markerTTL,
		Replicas:       max(replicas, 1),
	})
	if err != nil {
		return nil, fmt.Errorf("opening bucket %s: %w", name, err)
	}
	return kv, nil
}

// RecreateBucket creates the bucket name again after it was found gone
// (Gone), as OpenBucket does, once RecreatePause has passed: a bucket
// created again at once, while the server may still be ending the deleted
// one, now and then is gone again right after (cache's
// TestRunnerRecreatesADeletedBucket, 2 of 200 runs under load without the
// pause). It returns ctx's error if ctx ends during the pause.
func RecreateBucket(ctx context.Context, js jetstream.JetStream, name string, replicas int) (jetstream.KeyValue, error) {
	if err := wait.Sleep(ctx, RecreatePause); err != nil {
		return nil, err
	}
	return OpenBucket(ctx, js, name, replicas)
}
