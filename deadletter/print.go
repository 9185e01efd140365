package deadletter

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/detourhq/detour/internal/text"
)

// WriteTable prints entries as `processor dlq list` does: SEQ TIME CHAIN
// REASON ID ERROR. Cells are outside text, shown through text.Visible so
// that none can forge a row or act on the terminal.
func WriteTable(w io.Writer, entries []Entry) error {
	if len(entries) == 0 {
		_, err := fmt.Fprintln(w, "no dead letters")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tCHAIN\tREASON\tID\tERROR")
	for _, e := range entries {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.Time.Format(time.RFC3339), text.Visible(e.Chain),
			text.Visible(string(e.Reason)), cell(e.RequestID, 40), cell(e.Error, 80))
	}
	return tw.Flush()
}

// cell shows s as a table cell of at most n runes.
func cell(s string, n int) string {
	if s == "" {
		return "-"
	}
	s = text.Visible(s)
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// WriteMessage prints one dead letter for a person: what and why, every
// header, and the body (RenderBody), through text.Visible as WriteTable.
func WriteMessage(w io.Writer, m Message) error {
	fmt.Fprintf(w, "dead letter %d: chain %s, reason %s, id %s, stored %s\n", m.Seq, text.Visible(m.Chain),
		text.Visible(string(m.Reason)), text.Visible(m.RequestID), m.Time.Format(time.RFC3339))
	fmt.Fprintln(w, "\nheaders:")
	for _, k := range slices.Sorted(maps.Keys(m.Header)) {
		for _, v := range m.Header[k] {
			fmt.Fprintf(w, "  %s: %s\n", text.Visible(k), text.Visible(v))
		}
	}
	format, body := RenderBody(m.Data, m.Header)
	_, err := fmt.Fprintf(w, "\nbody (%d bytes, %s):\n%s\n", len(m.Data), format, strings.TrimSuffix(body, "\n"))
	return err
}

// WriteMessageJSON prints one dead letter as indented JSON: the fields of
// Message with the body base64-encoded under "body".
func WriteMessageJSON(w io.Writer, m Message) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Message
		Body []byte `json:"body"`
	}{m, m.Data})
}

// WriteReplayed prints a line per replayed dead letter, then how many.
func WriteReplayed(w io.Writer, done []Replayed) error {
	for _, r := range done {
		note := ""
		if r.AlreadyQueued {
			note = " (already queued by an earlier replay)"
		}
		if _, err := fmt.Fprintf(w, "replayed %d: id %s to %s as sequence %d%s\n", r.Seq, text.Visible(r.RequestID),
			text.Visible(r.Subject), r.StreamSeq, note); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "replayed %d dead letter(s)\n", len(done))
	return err
}

// ParseDeadline reads a replay deadline: a duration from now ("30m") or an
// RFC 3339 time. It must lie in the future.
func ParseDeadline(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("-deadline %s must be in the future", s)
		}
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("-deadline %q is neither a duration (30m) nor an RFC 3339 time", s)
	}
	if !t.After(now) {
		return time.Time{}, fmt.Errorf("-deadline %s is not in the future", s)
	}
	return t, nil
}
