package logs

import "log/slog"

// discard drops every record. A slog.Logger cannot be changed once made, so
// one serves every caller.
var discard = slog.New(slog.DiscardHandler)

// OrDiscard returns l, or when l is nil a logger that drops every record
// without formatting it, so that an option documented as "nil discards" can
// be used without a nil check at each call.
func OrDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return discard
	}
	return l
}
