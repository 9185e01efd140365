package natsconn

import (
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/detourhq/detour/internal/text"
)

// redactURL hides the secrets of a NATS URL, or of a comma-separated list of
// them, before it is printed: the password of user:password@, and the whole
// user part of token@ (NATS reads a user without a password as a token).
// It works on the text rather than url.Parse, so a URL that does not parse,
// or has no scheme, is hidden too.
func redactURL(raw string) string {
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		if head, user, tail, ok := splitUserinfo(p); ok {
			if name, _, hasPassword := strings.Cut(user, ":"); hasPassword {
				parts[i] = head + name + ":" + text.Redacted + tail
			} else {
				parts[i] = head + text.Redacted + tail
			}
		}
	}
	return strings.Join(parts, ",")
}

// urlSecrets returns the passwords and tokens of the URLs in raw, as written
// and percent-decoded, for scrubbing from error text.
func urlSecrets(raw string) []string {
	var secrets []string
	for p := range strings.SplitSeq(raw, ",") {
		_, user, _, ok := splitUserinfo(p)
		if !ok {
			continue
		}
		secret := user
		if _, password, hasPassword := strings.Cut(user, ":"); hasPassword {
			secret = password
		}
		if secret == "" {
			continue
		}
		secrets = append(secrets, secret)
		if dec, err := url.PathUnescape(secret); err == nil && dec != secret {
			secrets = append(secrets, dec)
		}
		if dec, err := url.QueryUnescape(secret); err == nil && dec != secret {
			secrets = append(secrets, dec)
		}
	}
	return secrets
}

// splitUserinfo cuts one URL into what precedes its user info, the user
// info, and the '@' with everything after it. The user info ends at the last
// '@', so a password holding an unescaped '/', '?' or '#' is still all of it.
func splitUserinfo(u string) (head, user, tail string, ok bool) {
	start := 0
	if i := strings.Index(u, "://"); i >= 0 {
		start = i + len("://")
	}
	for start < len(u) && (u[start] == ' ' || u[start] == '\t') {
		start++ // " user:pw@host" after a comma
	}
	at := strings.LastIndex(u[start:], "@")
	if at < 0 {
		return "", "", "", false
	}
	return u[:start], u[start : start+at], u[start+at:], true
}

// credentialRE matches the two secrets of a .creds file, should a client
// error ever quote them: an nkey seed (S, a key type letter, base32) and a
// JWT (three base64url parts, the first a JSON object).
var credentialRE = regexp.MustCompile(`\bS[OPANUXC][A-Z2-7]{50,}|\beyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*`)

// scrub hides secrets (longest first, so none is left half-shown) and
// anything shaped like a seed or JWT in msg, each by text.Redacted.
func scrub(msg string, secrets []string) string {
	msg = credentialRE.ReplaceAllString(msg, text.Redacted)
	sorted := slices.Clone(secrets)
	slices.SortFunc(sorted, func(a, b string) int { return len(b) - len(a) })
	for _, s := range sorted {
		msg = strings.ReplaceAll(msg, s, text.Redacted)
	}
	return msg
}
