package chain

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// bodyRule is one row of the table that reads a failure's class from the
// error body as well as the status. docs/failures.md reproduces the table
// row by row (see markdownRow); a test keeps the two equal.
type bodyRule struct {
	// description says when the rule holds, in the words of the docs.
	description string
	// class is what the rule gives; ClassNone means the class of the
	// embedded numeric code, through Classify.
	class Class
	// inAnswer limits the rule to an error object inside a 2xx answer; the
	// other rules override a non-2xx status's class as well.
	inAnswer bool
	// names match the body's type, code or status fields, ignoring case.
	names []string
	// phrases match the message, ignoring case, unless the status or body
	// names a rate limit (see rateLimited).
	phrases []string
	// numericCode matches an embedded code from 400 to 599.
	numericCode bool
	// anyError matches whatever error object the body holds.
	anyError bool
}

// rateLimitNames are the type, code and status values that name a rate limit.
var rateLimitNames = []string{"rate_limit_error", "rate_limit_exceeded", "RESOURCE_EXHAUSTED", "rate_limited", "too_many_requests"}

// bodyRules is the table, first match wins. Billing and context overflow
// come first because they hold whatever the status says: a provider out of
// credit answers 429 (OpenAI) or 400 (Anthropic), and an overflow can come
// back as a 500. For any other non-2xx status the status's class stands.
var bodyRules = []bodyRule{
	{
		description: `says the account is out of credit or quota (message "You exceeded your current quota…", "Your credit balance is too low…", …)`,
		class:       ClassAuth,
		names: []string{"insufficient_quota", "billing_hard_limit_reached", "billing_not_active", "billing_error",
			"insufficient_balance", "insufficient_credits", "insufficient_funds", "payment_required"},
		phrases: []string{"exceeded your current quota", "credit balance", "insufficient credit", "insufficient balance",
			"insufficient funds", "insufficient quota", "out of credit", "requires more credits", "can only afford",
			"credit limit", "billing details", "billing hard limit", "billing is not active", "billing not active", "payment required"},
	},
	{
		description: `says the prompt is longer than the context window (message "maximum context length", "prompt is too long", "context window", …)`,
		class:       ClassRequest,
		names:       []string{"context_length_exceeded", "context_window_exceeded", "model_context_window_exceeded", "prompt_too_long", "input_too_long"},
		phrases: []string{"maximum context length", "context length", "context window", "context limit", "exceeds the context",
			"prompt is too long", "prompt too long", "input is too long", "input too long", "too many tokens",
			"input token count", "reduce the length of the messages"},
	},
	{
		description: "has a numeric code from 400 to 599",
		inAnswer:    true,
		numericCode: true,
	},
	{description: "names a rate limit", class: ClassRateLimit, inAnswer: true, names: rateLimitNames},
	{
		description: "names a server fault or overload",
		class:       ClassServer,
		inAnswer:    true,
		names:       []string{"overloaded_error", "api_error", "server_error", "internal_error", "service_unavailable", "UNAVAILABLE", "INTERNAL"},
	},
	{description: "names a timeout", class: ClassTimeout, inAnswer: true, names: []string{"DEADLINE_EXCEEDED", "timeout", "timeout_error", "request_timeout"}},
	{
		description: "names a refused key, permission or an unknown model",
		class:       ClassAuth,
		inAnswer:    true,
		names: []string{"authentication_error", "permission_error", "invalid_api_key", "not_found_error", "model_not_found",
			"UNAUTHENTICATED", "PERMISSION_DENIED", "NOT_FOUND"},
	},
	{
		description: "names a malformed or oversized request",
		class:       ClassRequest,
		inAnswer:    true,
		names:       []string{"invalid_request_error", "request_too_large", "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE"},
	},
	{description: "holds any other error object", class: ClassServer, inAnswer: true, anyError: true},
}

// classifyBody is the class of a failure with this status and error body:
// the first rule of bodyRules that holds, else Classify(status). For a 2xx
// status it is only called when the body holds an error object.
func classifyBody(status int, u upstreamError) Class {
	r := ruleFor(status, u)
	switch {
	case r == nil:
		return Classify(status)
	case r.class == ClassNone:
		return Classify(u.code)
	}
	return r.class
}

// ruleFor is the first rule of bodyRules that holds, nil if none does.
func ruleFor(status int, u upstreamError) *bodyRule {
	inAnswer := status/100 == 2
	for i, r := range bodyRules {
		if (!r.inAnswer || inAnswer) && r.matches(status, u) {
			return &bodyRules[i]
		}
	}
	return nil
}

func (r bodyRule) matches(status int, u upstreamError) bool {
	switch {
	case r.anyError:
		return u.found
	case r.numericCode:
		return u.code >= 400 && u.code <= 599
	}
	for _, name := range u.names {
		if slices.ContainsFunc(r.names, func(n string) bool { return strings.EqualFold(n, name) }) {
			return true
		}
	}
	if len(r.phrases) == 0 || u.html || rateLimited(status, u) {
		return false
	}
	msg := strings.ToLower(u.message + " " + u.raw)
	return slices.ContainsFunc(r.phrases, func(p string) bool { return strings.Contains(msg, p) })
}

// rateLimited reports a status or body that names a rate limit, in which
// case the message's words are not read for billing or overflow: Gemini's
// per-minute limit says "You exceeded your current quota, please check your
// plan and billing details" with RESOURCE_EXHAUSTED, and OpenAI's
// tokens-per-minute limit links to the billing page and says "Please try
// again in 6s". Guessing a rate limit wrong costs a few retries; guessing
// billing wrong takes a provider out for auth_cooldown.
func rateLimited(status int, u upstreamError) bool {
	if status == http.StatusTooManyRequests || u.code == http.StatusTooManyRequests || u.retryDelay > 0 || messageDelay(u.message) > 0 {
		return true
	}
	return slices.ContainsFunc(u.names, func(name string) bool {
		return slices.ContainsFunc(rateLimitNames, func(n string) bool { return strings.EqualFold(n, name) })
	})
}

// markdownRow is the rule as a row of the table in docs/failures.md.
func (r bodyRule) markdownRow() string {
	names := "—"
	if len(r.names) > 0 {
		names = "`" + strings.Join(r.names, "`, `") + "`"
	}
	class := "`" + r.class.String() + "`"
	if r.class == ClassNone {
		class = "as that HTTP status"
	}
	scope := "any status"
	if r.inAnswer {
		scope = "2xx"
	}
	return fmt.Sprintf("| %s | %s | %s | %s |", r.description, names, class, scope)
}
