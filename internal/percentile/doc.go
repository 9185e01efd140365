// Package percentile is the one percentile rule of detour's reports: the
// nearest rank, shared by the publisher's summary and the bench, so that
// their p50 and p99 mean the same thing.
package percentile
