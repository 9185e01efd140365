// Package coalesce runs one repair for many callers that find the same gap:
// fifty workers that see a stream gone at once cause one re-creation, not
// fifty, and workers that keep failing cause one check per interval.
package coalesce
