package chain

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/samber/lo"
)

// This file applies the body table of bodyrules.go.

// classifyBody is the class of a failure with this status and error body:
// the first rule of bodyRules that holds, else Classify(status).
func classifyBody(status int, u upstreamError) Class {
	r := ruleFor(status, u)
	switch {
	case r == nil:
		return Classify(status)
	case r.class == ClassNone:
		return Classify(u.code)
	case r.counted:
		if own := ownClass(status, u); own.Retryable() {
			return own
		}
	}
	return r.class
}

// ownClass is the class without the body's words: the status's, or in a
// 2xx the embedded code's (ClassNone for none).
func ownClass(status int, u upstreamError) Class {
	if status/100 != 2 {
		return Classify(status)
	}
	if u.code >= 400 && u.code <= 599 {
		return Classify(u.code)
	}
	return ClassNone
}

// ruleFor is the first rule of bodyRules that holds, nil if none does.
func ruleFor(status int, u upstreamError) *bodyRule {
	inAnswer := status/100 == 2
	limited := rateLimited(status, u)
	var msg string
	for i, r := range bodyRules {
		if r.inAnswer && !inAnswer {
			continue
		}
		if len(r.phrases) > 0 && msg == "" {
			msg = strings.ToLower(u.message + " " + u.detail + " " + u.raw)
		}
		if r.matches(u, msg, limited) {
			return &bodyRules[i]
		}
	}
	return nil
}

// matches reports whether the rule holds for u, whose texts lowered are
// msg; limited says the status or body names a rate limit.
func (r bodyRule) matches(u upstreamError, msg string, limited bool) bool {
	if named(u, r.unlessNamed) {
		return false
	}
	switch {
	case r.anyError:
		return u.found
	case r.numericCode:
		return u.code >= 400 && u.code <= 599
	case r.flagged && u.flagged, named(u, r.names):
		return true
	}
	if len(r.phrases) == 0 || u.html || (limited && !r.counted && !r.limitWords) {
		return false
	}
	return slices.ContainsFunc(r.phrases, func(p string) bool { return strings.Contains(msg, p) })
}

// named reports whether the body names one of names, ignoring case.
func named(u upstreamError, names []string) bool {
	return slices.ContainsFunc(u.names, func(name string) bool {
		return slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, name) })
	})
}

// rateLimited reports a status or body that names a rate limit, whose
// words are then not read for the rows that stop retries: Gemini's limit
// says "check your plan and billing details", OpenAI's links to billing. A
// rate limit guessed wrong costs a few retries, billing guessed wrong an
// auth_cooldown. The counted rows, keeping a 429's class, are still read.
func rateLimited(status int, u upstreamError) bool {
	return status == http.StatusTooManyRequests || u.code == http.StatusTooManyRequests || u.retryDelay > 0 ||
		messageDelay(u.message) > 0 || named(u, rateLimitNames)
}

// markdownRow is the rule as a row of the table in docs/failures.md.
func (r bodyRule) markdownRow() string {
	names := lo.Map(r.names, func(n string, _ int) string { return "`" + n + "`" })
	if r.flagged {
		names = append(names, "`metadata.reasons`")
	}
	if len(names) == 0 {
		names = []string{"—"}
	}
	class := "`" + r.class.String() + "`"
	switch {
	case r.class == ClassNone:
		class = "as that HTTP status"
	case r.counted:
		class += ", or the status's class where that is retried (429 `rate_limit`, 408 `timeout`)"
	}
	scope := "any status"
	if r.inAnswer {
		scope = "2xx"
	}
	sources := lo.Map(r.sources, func(s string, _ int) string { return sourceLink(s) })
	return fmt.Sprintf("| %s | %s | %s | %s | %s |", r.description, strings.Join(names, ", "), class, scope, strings.Join(sources, ", "))
}

// githubRef is a source written "owner/repo#N".
var githubRef = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+)#([0-9]+)$`)

// sourceLink is a source as a markdown link: a GitHub reference to its
// issue (which GitHub forwards to a pull request), a URL under its host.
func sourceLink(s string) string {
	if m := githubRef.FindStringSubmatch(s); m != nil {
		return fmt.Sprintf("[%s](https://github.com/%s/issues/%s)", s, m[1], m[2])
	}
	host, _, _ := strings.Cut(strings.TrimPrefix(s, "https://"), "/")
	return fmt.Sprintf("[%s](%s)", host, s)
}
