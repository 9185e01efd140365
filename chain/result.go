package chain

// Outcome says how one attempt ended.
type Outcome string

// Attempt outcomes.
const (
	OutcomeOK      Outcome = "ok"
	OutcomeFailed  Outcome = "failed"
	OutcomeSkipped Outcome = "skipped"
)

// Status is the result's overall status.
type Status string

// Result statuses.
const (
	StatusOK     Status = "ok"
	StatusFailed Status = "failed"
)

// Attempt records one call to, or skip of, a provider.
type Attempt struct {
	Provider     string  `msgpack:"provider" json:"provider"`
	Model        string  `msgpack:"model" json:"model"`
	Outcome      Outcome `msgpack:"outcome" json:"outcome"`
	Class        Class   `msgpack:"class,omitempty" json:"class,omitempty"`
	StatusCode   int     `msgpack:"status_code,omitempty" json:"status_code,omitempty"`
	RetryAfterMs int64   `msgpack:"retry_after_ms,omitempty" json:"retry_after_ms,omitempty"`
	LatencyMs    int64   `msgpack:"latency_ms" json:"latency_ms"`
	Error        string  `msgpack:"error,omitempty" json:"error,omitempty"`
	// StopReason is why an answer was not complete ("length",
	// "content_filter", "refusal", "error", ...); empty otherwise.
	StopReason string `msgpack:"stop_reason,omitempty" json:"stop_reason,omitempty"`
}

// Result is the annotated answer to one request (docs/results.md). The stream
// adds the queue time, deliveries and metadata to what the chain fills in.
type Result struct {
	ID       string    `msgpack:"id" json:"id"`
	Status   Status    `msgpack:"status" json:"status"`
	Content  string    `msgpack:"content" json:"content"`
	Model    string    `msgpack:"model" json:"model"`
	Provider string    `msgpack:"provider" json:"provider"`
	Position int       `msgpack:"position" json:"position"`
	Degraded bool      `msgpack:"degraded" json:"degraded"`
	Attempts []Attempt `msgpack:"attempts" json:"attempts"`
	Usage    Usage     `msgpack:"usage" json:"usage"`
	// Cost is what the answer cost at the answering provider's price, in
	// the chain file's currency; nil when that provider has no price.
	Cost       *float64    `msgpack:"cost,omitempty" json:"cost,omitempty"`
	LatencyMs  int64       `msgpack:"latency_ms" json:"latency_ms"`
	QueuedMs   int64       `msgpack:"queued_ms" json:"queued_ms"`
	Deliveries uint64      `msgpack:"deliveries" json:"deliveries"`
	Error      string      `msgpack:"error,omitempty" json:"error,omitempty"`
	Metadata   Metadata    `msgpack:"metadata,omitempty" json:"metadata,omitempty"`
	Cache      CacheStatus `msgpack:"cache,omitempty" json:"cache,omitempty"`
	// AgeS is a cached answer's age in whole seconds; omitted when zero.
	AgeS int64 `msgpack:"age_s,omitempty" json:"age_s,omitempty"`
}
