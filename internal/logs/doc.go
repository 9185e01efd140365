// Package logs holds what detour's packages share about their *slog.Logger
// options: for now, that a nil logger means discard (OrDiscard).
package logs
