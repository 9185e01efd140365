package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/internal/text"
)

const dlqUsage = `usage: processor dlq list [-reason R] [-chain C] [-json]
       processor dlq show [-json] SEQ
       processor dlq replay [-reason R] [-chain C] [-deadline D] [-json] (SEQ... | -all)
       processor dlq purge [-reason R] [-chain C] (SEQ... | -all)

Dead letters live in the stream DETOUR_DEADLETTER and are named by their
sequence (SEQ). Reasons: bad_request, bad_reply_subject, too_large, expired,
poison, invalid_output.

  list    one row per dead letter: SEQ TIME CHAIN REASON ID ERROR
  show    one dead letter's headers and body
  replay  republish requests to detour.requests.<chain> and remove their
          dead letters once queued; -all (or -reason/-chain) selects every
          matching one. A request whose own deadline has passed is refused
          unless -deadline gives a new one (a duration from now, or RFC 3339).
  purge   remove the named dead letters, or every one the filters select
          (-reason/-chain), or with -all every dead letter (or every one the
          filters select), and print how many were removed

Connects like every client command: DETOUR_NATS_URL, else the embedded
server on DETOUR_LISTEN.
`

// runDLQ runs `processor dlq ...`; the work is done by deadletter.Store.
func runDLQ(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, dlqUsage)
		return 2
	}
	cmd, args := args[0], args[1:]
	var run func(context.Context) error
	fs := flag.NewFlagSet("processor dlq "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c := &dlqCommand{stdout: stdout, stderr: stderr}
	filters := func() {
		fs.StringVar(&c.reason, "reason", "", "only dead letters of this reason")
		fs.StringVar(&c.chain, "chain", "", "only dead letters of this chain")
	}
	switch cmd {
	case "list", "ls":
		filters()
		fs.BoolVar(&c.json, "json", false, "one JSON object per line")
		run = c.list
	case "show":
		fs.BoolVar(&c.json, "json", false, "print the dead letter as JSON (body base64-encoded)")
		run = c.show
	case "replay":
		filters()
		fs.BoolVar(&c.all, "all", false, "replay every dead letter the filters select")
		fs.StringVar(&c.deadline, "deadline", "", "new deadline: a duration from now (30m) or an RFC 3339 time")
		fs.BoolVar(&c.json, "json", false, "one JSON object per replayed dead letter")
		run = c.replay
	case "purge":
		filters()
		fs.BoolVar(&c.all, "all", false, "purge every dead letter the filters select (all of them without filters)")
		run = c.purge
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, dlqUsage)
		return 0
	default:
		fmt.Fprintf(stderr, "processor dlq: unknown command %q\n%s", cmd, dlqUsage)
		return 2
	}
	positional, err := dlqParse(fs, args)
	if err == nil {
		err = c.setArgs(cmd, positional)
	}
	if err != nil {
		return usageExit(fs, err, dlqUsage, dlqCommandUsage[cmd]+"\n", stdout, stderr)
	}
	return withClient("processor dlq", "detour-dlq", stderr, func(ctx context.Context, js jetstream.JetStream) int {
		c.store = deadletter.NewStore(js)
		if err := run(ctx); err != nil {
			fmt.Fprintf(stderr, "processor dlq %s: %s\n", cmd, text.VisibleError(err))
			return 1
		}
		return 0
	})
}

// dlqCommandUsage is each command's usage line, printed after its error.
var dlqCommandUsage = map[string]string{
	"list":   "usage: processor dlq list [-reason R] [-chain C] [-json]",
	"ls":     "usage: processor dlq list [-reason R] [-chain C] [-json]",
	"show":   "usage: processor dlq show [-json] SEQ",
	"replay": "usage: processor dlq replay [-reason R] [-chain C] [-deadline D] [-json] (SEQ... | -all)",
	"purge":  "usage: processor dlq purge [-reason R] [-chain C] (SEQ... | -all)",
}

// dlqCommand holds one dlq command's flags and arguments.
type dlqCommand struct {
	stdout, stderr io.Writer
	store          *deadletter.Store

	reason, chain, deadline string
	deadlineAt              time.Time // deadline parsed, zero when none
	json, all               bool
	sel                     deadletter.Selection
}

// setArgs checks flags and positional arguments against the command.
func (c *dlqCommand) setArgs(cmd string, positional []string) error {
	c.sel.Filter = deadletter.Filter{Chain: c.chain}
	if c.reason != "" {
		r, err := deadletter.ParseReason(c.reason)
		if err != nil {
			return fmt.Errorf("unknown reason %q; the reasons are %s", c.reason, deadletter.ReasonNames())
		}
		c.sel.Filter.Reason = r
	}
	if err := c.sel.Filter.Check(); err != nil {
		return fmt.Errorf("-%w", err)
	}
	if c.deadline != "" {
		at, err := deadletter.ParseDeadline(c.deadline, time.Now())
		if err != nil {
			return err
		}
		c.deadlineAt = at
	}
	for _, a := range positional {
		seq, err := strconv.ParseUint(a, 10, 64)
		if err != nil || seq == 0 {
			return fmt.Errorf("%q is not a dead-letter sequence", a)
		}
		c.sel.Seqs = append(c.sel.Seqs, seq)
	}
	seqs := len(c.sel.Seqs)
	filtered := c.sel.Filter != (deadletter.Filter{})
	switch cmd {
	case "list", "ls":
		if seqs > 0 {
			return errors.New("list takes no sequences (use show SEQ)")
		}
	case "show":
		if seqs != 1 {
			return errors.New("show takes one sequence")
		}
	case "replay", "purge":
		// A purge, like a replay, acts on nothing it is not told to.
		switch {
		case seqs > 0 && (c.all || filtered):
			return errors.New("name sequences or select with -all/-reason/-chain, not both")
		case seqs > 0 || c.all || filtered:
		case cmd == "replay":
			return errors.New("name the sequences to replay, or -all")
		default:
			return errors.New("name the dead letters to purge (SEQ..., or -reason/-chain), or purge every one with -all")
		}
	}
	return nil
}

// jsonLines writes each of items as one line of JSON.
func jsonLines[T any](w io.Writer, items []T) error {
	enc := json.NewEncoder(w)
	for _, item := range items {
		if err := enc.Encode(item); err != nil {
			return err
		}
	}
	return nil
}

// dlqParse parses flags that may come before, between or after the
// positional arguments ("replay 12 13 -deadline 1h").
func dlqParse(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func (c *dlqCommand) list(ctx context.Context) error {
	entries, err := c.store.List(ctx, c.sel.Filter)
	if err != nil {
		return err
	}
	if c.json {
		return jsonLines(c.stdout, entries)
	}
	return deadletter.WriteTable(c.stdout, entries)
}

func (c *dlqCommand) show(ctx context.Context) error {
	m, err := c.store.Get(ctx, c.sel.Seqs[0])
	if err != nil {
		return err
	}
	if c.json {
		return deadletter.WriteMessageJSON(c.stdout, m)
	}
	return deadletter.WriteMessage(c.stdout, m)
}

func (c *dlqCommand) replay(ctx context.Context) error {
	opts := deadletter.ReplayOptions{Deadline: c.deadlineAt}
	done, err := c.store.ReplaySelected(ctx, c.sel, opts)
	if c.json {
		_ = jsonLines(c.stdout, done)
	} else {
		_ = deadletter.WriteReplayed(c.stdout, done)
	}
	if err != nil && errors.Is(err, deadletter.ErrDeadlinePassed) && c.deadline == "" {
		err = fmt.Errorf("%w\n(replay with -deadline 1h to give such requests a new deadline)", err)
	}
	return err
}

func (c *dlqCommand) purge(ctx context.Context) error {
	n, err := c.store.PurgeSelected(ctx, c.sel)
	fmt.Fprintf(c.stdout, "purged %d dead letter(s)\n", n)
	return err
}
