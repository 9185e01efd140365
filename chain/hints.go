package chain

import (
	"encoding/json"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// maxHint caps every wait hint, the longest whole-second Duration, so that
// the arithmetic cannot overflow (max_cooldown caps a cooldown far lower).
const maxHint = time.Duration(math.MaxInt64/int64(time.Second)) * time.Second

// answeredAt is when the provider answered by its own clock, against which
// the hints that name a time are read (a local clock off by minutes would
// turn seconds into minutes of cooldown): the Date header (RFC 9110 §6.6.1)
// when further from the local time than dateSlack, else the local time.
func answeredAt(header http.Header) time.Time {
	now := time.Now()
	if t, err := http.ParseTime(header.Get("Date")); err == nil && t.Sub(now).Abs() > dateSlack {
		return t
	}
	return now
}

// dateSlack is how far a Date header (truncated to the second, and late by
// the round trip) may be from the local time with the clocks agreeing.
const dateSlack = 3 * time.Second

// waitHint is the longest wait the provider asked for by any hint:
// Retry-After (RFC 9110 §10.2.3), retry-after-ms (OpenAI, Azure OpenAI),
// the reset of every rate-limit window reported spent (windowWait), Google's
// retryDelay and Hugging Face's estimated_time in the body, and a wait a
// message names ("Please try again in 6.5s"), its own or a relayed one's.
// Headers relayed in the body count where the response has none of that
// name. Zero when there is none.
func waitHint(header http.Header, u upstreamError, now time.Time) time.Duration {
	h := withRelayedHeaders(header, u.hintHeader)
	ra, _ := ParseRetryAfter(h.Get("Retry-After"), now) // 0 when there is none
	ms, _ := parseDecimal(strings.TrimSpace(h.Get("Retry-After-Ms")), time.Millisecond)
	return max(ra, ms, windowWait(h, now), u.retryDelay, u.loadWait, messageDelay(u.message), messageDelay(u.detail))
}

// withRelayedHeaders is header with relayed added where it has no value of
// that name.
func withRelayedHeaders(header, relayed http.Header) http.Header {
	if len(relayed) == 0 {
		return header
	}
	h := header.Clone()
	if h == nil {
		h = http.Header{}
	}
	for key, values := range relayed {
		if h.Get(key) == "" {
			h[http.CanonicalHeaderKey(key)] = values
		}
	}
	return h
}

// secondsHint reads a JSON number of seconds (Hugging Face's
// estimated_time: 300.8891906738281), rounded up; 0 for anything else or
// not positive; maxHint at most.
func secondsHint(raw json.RawMessage) time.Duration {
	if f := jsonNumber(raw, maxHint.Seconds()); f < maxHint.Seconds() {
		return time.Duration(math.Ceil(f * float64(time.Second)))
	}
	return maxHint
}

// parseDecimal reads "digits" or "digits.digits" as a count of unit,
// rounded up, refusing signs, exponents, NaN and Inf; maxHint at most.
func parseDecimal(s string, unit time.Duration) (time.Duration, bool) {
	whole, frac, dot := strings.Cut(strings.TrimPrefix(s, "+"), ".")
	if !allDigits(whole) || (dot && !allDigits(frac)) {
		return 0, false
	}
	n, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || n >= int64(maxHint/unit) {
		return maxHint, true // only digits: the error is a value out of range
	}
	d := time.Duration(n) * unit
	if dot {
		// Below one unit, so float precision is enough and cannot overflow.
		f, _ := strconv.ParseFloat("0."+frac, 64)
		d += time.Duration(math.Ceil(f * float64(unit)))
	}
	return d, true
}

func allDigits(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

// parseProtoDuration reads a protobuf Duration's JSON form ("1.5s").
func parseProtoDuration(s string) (time.Duration, bool) {
	secs, ok := strings.CutSuffix(strings.TrimSpace(s), "s")
	if !ok {
		return 0, false
	}
	return parseDecimal(secs, time.Second)
}

// tryAgainIn finds OpenAI's and Groq's "Please try again in 6.5s" (or
// "20ms", "1m26.4s"): their rate limiter's own words, in Go's duration
// syntax, as reliable as a header.
var tryAgainIn = regexp.MustCompile(`(?i)try again in ((?:\d{1,12}(?:\.\d{1,9})?(?:ms|h|m|s))+)`)

// waitInWords finds a wait spelt in words: "Try again in 60 seconds" (LiteLLM's
// router, BerriAI/litellm#3933; Azure's, Azure-Samples/azure-search-openai-demo#177)
// and Azure OpenAI's "Please retry after 9 seconds"
// (microsoft/sample-app-aoai-chatGPT#406, pollinations/pollinations#6260).
var waitInWords = regexp.MustCompile(`(?i)(?:try again in|retry after) (\d{1,12}(?:\.\d{1,9})?) ?(milliseconds?|seconds?|minutes?|hours?)\b`)

// messageDelay is the longest wait a provider's message names, 0 if none.
func messageDelay(msg string) time.Duration {
	var d time.Duration
	if m := tryAgainIn.FindStringSubmatch(msg); m != nil {
		parsed, err := time.ParseDuration(strings.ToLower(m[1]))
		if err != nil {
			parsed = maxHint // well formed but beyond a Duration
		}
		d = min(parsed, maxHint)
	}
	if m := waitInWords.FindStringSubmatch(msg); m != nil {
		if words, ok := parseDecimal(m[1], wordUnit(m[2])); ok {
			d = max(d, words)
		}
	}
	return d
}

// wordUnit is the unit waitInWords found.
func wordUnit(word string) time.Duration {
	switch word = strings.ToLower(word); {
	case strings.HasPrefix(word, "milli"):
		return time.Millisecond
	case strings.HasPrefix(word, "sec"):
		return time.Second
	case strings.HasPrefix(word, "min"):
		return time.Minute
	}
	return time.Hour
}
