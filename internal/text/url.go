package text

import "net/url"

// Redacted stands in for a secret in a shown URL, as in
// url.URL.Redacted: brackets would be percent-encoded there.
const Redacted = "xxxxx"

// URL is raw as it may be shown in a log line, an error or a result: its
// user part (a password, or a token as a user) and the values of its query
// (which may carry a key) replaced by [Redacted], its fragment left out. A
// raw that does not parse as a URL with a host is shown as
// "(unreadable URL)": what it holds cannot be told apart.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unreadable URL)"
	}
	if u.User != nil {
		u.User = url.User(Redacted)
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{Redacted}
		}
		u.RawQuery = q.Encode()
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}
