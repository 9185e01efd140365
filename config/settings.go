package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/detourhq/detour/internal/text"
)

// Log formats accepted by DETOUR_LOG_FORMAT.
const (
	LogFormatText = "text"
	LogFormatJSON = "json"
)

// MaxWorkers bounds DETOUR_WORKERS. Each worker is a goroutine and a slot in
// the pull loop's channels; past this, a processor holds more calls than one
// process should (scale out instead), and a mistyped value would take the
// host's memory before the first request.
const MaxWorkers = 10_000

// Settings are the DETOUR_* environment variables. The default tags are the
// documented defaults; [LoadSettings] fills and validates them.
//
// Each tag spells the full variable name and Process runs with an empty
// prefix on purpose: with a prefix, envconfig also falls back to the bare
// name (WORKERS, LISTEN, CONFIG, LOG_LEVEL...) when the prefixed one is unset,
// so unrelated variables of the host would silently configure detour.
type Settings struct {
	NATSURL     string `envconfig:"DETOUR_NATS_URL" desc:"NATS server URL(s), comma-separated; empty starts an embedded server on DETOUR_LISTEN"`
	NATSCreds   string `envconfig:"DETOUR_NATS_CREDS" desc:"path of a NATS credentials (.creds) file"`
	NATSTLSCA   string `envconfig:"DETOUR_NATS_TLS_CA" desc:"path of a CA certificate (PEM) that signs the NATS server certificate"`
	NATSTLSCert string `envconfig:"DETOUR_NATS_TLS_CERT" desc:"path of a client certificate (PEM) for NATS; needs DETOUR_NATS_TLS_KEY"`
	NATSTLSKey  string `envconfig:"DETOUR_NATS_TLS_KEY" desc:"path of the client certificate's private key (PEM); needs DETOUR_NATS_TLS_CERT"`
	// The client's own default ping interval, 2 minutes, would leave a
	// processor cut off by the network for over four AckWaits.
	NATSPingInterval time.Duration `envconfig:"DETOUR_NATS_PING_INTERVAL" default:"5s" desc:"how often a client pings the NATS server; with DETOUR_NATS_MAX_PINGS_OUT it bounds how long a connection the network stopped carrying goes unnoticed (at least 100ms)"`
	NATSMaxPingsOut  int           `envconfig:"DETOUR_NATS_MAX_PINGS_OUT" default:"2" desc:"pings a client leaves unanswered before it takes the connection as lost and reconnects (at least 1)"`

	Listen  string `envconfig:"DETOUR_LISTEN" default:"127.0.0.1:4222" desc:"host:port of the embedded NATS server (used when DETOUR_NATS_URL is empty)"`
	DataDir string `envconfig:"DETOUR_DATA_DIR" default:"./detour-data" desc:"JetStream storage directory of the embedded server"`
	Config  string `envconfig:"DETOUR_CONFIG" default:"detour.yaml" desc:"path of the YAML chain file"`

	Workers       int           `envconfig:"DETOUR_WORKERS" default:"64" desc:"requests processed at once by this processor (1 to 10000)"`
	Replicas      int           `envconfig:"DETOUR_REPLICAS" default:"1" desc:"replicas of every stream and the KV bucket (1-5)"`
	AckWait       time.Duration `envconfig:"DETOUR_ACK_WAIT" default:"30s" desc:"time a delivery may stay unacknowledged before redelivery (at least 1s)"`
	MaxAckPending int           `envconfig:"DETOUR_MAX_ACK_PENDING" default:"1000" desc:"unacknowledged deliveries allowed per chain consumer"`
	RequestTTL    time.Duration `envconfig:"DETOUR_REQUEST_TTL" default:"24h" desc:"the deadline of a request that sets none, counted from its publication, and the latest of any: a processor dead-letters it as expired then"`
	ResultTTL     time.Duration `envconfig:"DETOUR_RESULT_TTL" default:"24h" desc:"how long results are kept in DETOUR_RESULTS"`
	ReplyPrefixes []string      `envconfig:"DETOUR_REPLY_PREFIXES" default:"detour.results.,_INBOX." desc:"subject prefixes a request's reply_to may use; each ends in '.'"`
	MaxPayload    int           `envconfig:"DETOUR_MAX_PAYLOAD" default:"1048576" desc:"largest request body in bytes; larger ones are dead-lettered as too_large"`

	// The streams' byte limits, reserved in the server's store.
	RequestsMaxBytes   int64 `envconfig:"DETOUR_REQUESTS_MAX_BYTES" default:"268435456" desc:"bytes DETOUR_REQUESTS may hold; when full, new requests are refused at publish (at least DETOUR_MAX_PAYLOAD, at most DETOUR_DEADLETTER_MAX_BYTES)"`
	ResultsMaxBytes    int64 `envconfig:"DETOUR_RESULTS_MAX_BYTES" default:"1073741824" desc:"bytes DETOUR_RESULTS may hold; when full, its oldest results make room for new ones (at least 1048576)"`
	DeadLetterMaxBytes int64 `envconfig:"DETOUR_DEADLETTER_MAX_BYTES" default:"536870912" desc:"bytes DETOUR_DEADLETTER may hold; when full, requests to dead-letter wait in DETOUR_REQUESTS (at least DETOUR_REQUESTS_MAX_BYTES)"`

	MetricsAddr     string        `envconfig:"DETOUR_METRICS_ADDR" default:"127.0.0.1:9464" desc:"host:port serving the status page on /, /metrics, /healthz and /readyz; empty disables"`
	LogLevel        string        `envconfig:"DETOUR_LOG_LEVEL" default:"info" desc:"debug, info, warn or error"`
	LogFormat       string        `envconfig:"DETOUR_LOG_FORMAT" default:"text" desc:"text or json"`
	ShutdownTimeout time.Duration `envconfig:"DETOUR_SHUTDOWN_TIMEOUT" default:"30s" desc:"time in-flight requests get to finish after a stop signal"`

	MaxInvalidDeliveries uint64 `envconfig:"DETOUR_MAX_INVALID_DELIVERIES" default:"3" desc:"deliveries a request gets when every provider called answers it invalidly (for example against its response_schema); then it is dead-lettered invalid_output"`
}

// LoadSettings reads the DETOUR_* environment variables, applies defaults
// and validates the result. Its error is a *[SettingsError] naming every
// variable at fault, each once.
func LoadSettings() (Settings, error) {
	var (
		s        Settings
		problems []string
		refused  = map[string]bool{}
	)
	v := reflect.ValueOf(&s).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		// One variable at a time, so that every bad one is reported: on
		// the whole struct envconfig stops at the first.
		one := reflect.New(reflect.StructOf([]reflect.StructField{{Name: "V", Type: f.Type, Tag: f.Tag}}))
		key := f.Tag.Get("envconfig")
		raw, set := os.LookupEnv(key)
		if set && wholeNumber(f.Type) && readDecimal(strings.TrimSpace(raw), one.Elem().Field(0)) {
			v.Field(i).Set(one.Elem().Field(0))
			continue
		}
		if err := envconfig.Process("", one.Interface()); err != nil {
			problems = append(problems, key+": "+valueProblem(f, err))
			refused[key] = true
			continue
		}
		if set && wholeNumber(f.Type) {
			// envconfig read what is not decimal: Go's base prefixes
			// (0x10, 0b11) or digit separators (1_0).
			problems = append(problems, fmt.Sprintf("%s: %q is not a whole number in decimal digits", key, strings.TrimSpace(raw)))
			refused[key] = true
			continue
		}
		v.Field(i).Set(one.Elem().Field(0))
	}
	// Forgive the spelling an operator would not think twice about:
	// "INFO", "JSON", "detour.results., _INBOX.".
	s.LogLevel = strings.ToLower(strings.TrimSpace(s.LogLevel))
	s.LogFormat = strings.ToLower(strings.TrimSpace(s.LogFormat))
	for i, p := range s.ReplyPrefixes {
		s.ReplyPrefixes[i] = strings.TrimSpace(p)
	}
	// A variable that could not be read has no value to check further.
	for _, p := range s.problems() {
		if key, _, _ := strings.Cut(p, ":"); !refused[key] {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		return Settings{}, &SettingsError{Problems: problems}
	}
	return s, nil
}

var durationType = reflect.TypeFor[time.Duration]()

// wholeNumber reports whether t is the type of a whole-number setting.
func wholeNumber(t reflect.Type) bool {
	return t != durationType && t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64
}

// readDecimal reads raw in decimal into value, a whole number, and reports
// whether it could: envconfig reads Go's base prefixes, so that 010 would
// be eight and 08 no number at all.
func readDecimal(raw string, value reflect.Value) bool {
	if value.CanUint() {
		n, err := strconv.ParseUint(raw, 10, value.Type().Bits())
		value.SetUint(n)
		return err == nil
	}
	n, err := strconv.ParseInt(raw, 10, value.Type().Bits())
	value.SetInt(n)
	return err == nil
}

// valueProblem says, in the words of docs/settings.md, why a variable's
// value could not be read as its field's type.
func valueProblem(f reflect.StructField, err error) string {
	var pe *envconfig.ParseError
	if !errors.As(err, &pe) {
		return err.Error()
	}
	want := "a whole number"
	switch {
	case f.Type == durationType:
		want = "a duration such as 500ms, 30s or 10m"
	case !wholeNumber(f.Type):
		return fmt.Sprintf("%q cannot be read: %v", pe.Value, pe.Err)
	}
	if strings.TrimSpace(pe.Value) == "" {
		return fmt.Sprintf("is set but empty: give %s, or unset it for the default %s", want, f.Tag.Get("default"))
	}
	if errors.Is(pe.Err, strconv.ErrRange) {
		return fmt.Sprintf("%q is out of range", pe.Value)
	}
	if f.Type == durationType {
		if _, err := strconv.ParseFloat(pe.Value, 64); err == nil {
			return fmt.Sprintf("%q is not a duration: give a unit, such as %ss", pe.Value, pe.Value)
		}
		return fmt.Sprintf("%q is not %s", pe.Value, want)
	}
	if f.Type.Kind() >= reflect.Uint && strings.HasPrefix(strings.TrimSpace(pe.Value), "-") {
		return fmt.Sprintf("%q must not be negative", pe.Value)
	}
	return fmt.Sprintf("%q is not %s", pe.Value, want)
}

// minResultsBytes is the least DETOUR_RESULTS_MAX_BYTES: one result as
// large as a NATS server takes by default (1 MiB).
const minResultsBytes = 1 << 20

// reservedSubjects are the prefixes detour consumes, serves or stores dead
// letters under (wire's, which config does not import: a test checks they
// agree). A reply prefix overlapping one would let a request make the
// processor feed its own queues; the API subjects are refused by their '$'.
var reservedSubjects = []string{"detour.requests.", "detour.ask.", "detour.deadletter."}

var subjectPrefixRE = regexp.MustCompile(`^[^\s*>.]+(\.[^\s*>.]+)*\.$`)

// Validate checks every setting and returns all problems joined; each names
// its variable, for example "DETOUR_WORKERS: must be at least 1".
func (s Settings) Validate() error {
	var errs []error
	for _, p := range s.problems() {
		errs = append(errs, errors.New(p))
	}
	return errors.Join(errs...)
}

// problems lists what Validate reports, each starting with its variable.
func (s Settings) problems() []string {
	var out []string
	bad := func(key, format string, args ...any) {
		out = append(out, fmt.Sprintf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	want := func(ok bool, key, format string, args ...any) {
		if !ok {
			bad(key, format, args...)
		}
	}

	// Client commands find the embedded server at DETOUR_LISTEN, so its
	// port cannot be left to the system (0).
	if err := checkHostPort(s.Listen, 1); err != nil {
		bad("DETOUR_LISTEN", "%v", err)
	}
	if err := checkHostPort(s.MetricsAddr, 0); s.MetricsAddr != "" && err != nil {
		bad("DETOUR_METRICS_ADDR", "%v", err)
	}
	if err := checkNATSURLs(s.NATSURL); s.NATSURL != "" && err != nil {
		bad("DETOUR_NATS_URL", "%v", err)
	}
	want(s.NATSPingInterval >= 100*time.Millisecond, "DETOUR_NATS_PING_INTERVAL", "must be at least 100ms")
	want(s.NATSMaxPingsOut >= 1, "DETOUR_NATS_MAX_PINGS_OUT", "must be at least 1")
	want((s.NATSTLSCert == "") == (s.NATSTLSKey == ""), "DETOUR_NATS_TLS_CERT", "must be set together with DETOUR_NATS_TLS_KEY")
	// Blank is empty: " " would be a directory or file named by a space.
	want(strings.TrimSpace(s.DataDir) != "", "DETOUR_DATA_DIR", "must not be empty")
	want(strings.TrimSpace(s.Config) != "", "DETOUR_CONFIG", "must not be empty")
	want(s.Workers >= 1 && s.Workers <= MaxWorkers, "DETOUR_WORKERS", "must be from 1 to %d", MaxWorkers)
	want(s.Replicas >= 1 && s.Replicas <= 5, "DETOUR_REPLICAS", "must be between 1 and 5")
	want(s.AckWait >= time.Second, "DETOUR_ACK_WAIT", "must be at least 1s")
	want(s.MaxAckPending >= 1, "DETOUR_MAX_ACK_PENDING", "must be at least 1")
	want(s.RequestTTL >= time.Second, "DETOUR_REQUEST_TTL", "must be at least 1s")
	// The results stream's MaxAge: the server takes nothing under 100ms.
	want(s.ResultTTL >= time.Second, "DETOUR_RESULT_TTL", "must be at least 1s")
	want(s.MaxPayload > 0, "DETOUR_MAX_PAYLOAD", "must be positive")
	// A request as large as may be sent must fit, and a full queue of them
	// must fit the dead letters, should every one expire: a request's dead
	// letter is all that is left of it.
	want(s.RequestsMaxBytes >= int64(s.MaxPayload), "DETOUR_REQUESTS_MAX_BYTES", "must be at least DETOUR_MAX_PAYLOAD (%d)", s.MaxPayload)
	want(s.ResultsMaxBytes >= minResultsBytes, "DETOUR_RESULTS_MAX_BYTES", "must be at least %d (a result as large as the server takes)", minResultsBytes)
	want(s.DeadLetterMaxBytes >= s.RequestsMaxBytes, "DETOUR_DEADLETTER_MAX_BYTES",
		"must be at least DETOUR_REQUESTS_MAX_BYTES (%d): every queued request may be dead-lettered", s.RequestsMaxBytes)
	want(s.ShutdownTimeout > 0, "DETOUR_SHUTDOWN_TIMEOUT", "must be positive")
	want(s.MaxInvalidDeliveries >= 1, "DETOUR_MAX_INVALID_DELIVERIES", "must be at least 1")
	want(len(s.ReplyPrefixes) > 0, "DETOUR_REPLY_PREFIXES", "must list at least one prefix")
	for i, p := range s.ReplyPrefixes {
		if err := checkReplyPrefix(p); err != nil {
			bad("DETOUR_REPLY_PREFIXES", "prefix %d %q: %v", i+1, p, err)
		}
	}
	_, known := logLevels[s.LogLevel]
	want(known, "DETOUR_LOG_LEVEL", "must be one of debug, info, warn, error (got %q)", s.LogLevel)
	want(s.LogFormat == LogFormatText || s.LogFormat == LogFormatJSON, "DETOUR_LOG_FORMAT", "must be %s or %s (got %q)", LogFormatText, LogFormatJSON, s.LogFormat)
	return out
}

func checkReplyPrefix(p string) error {
	switch {
	case p == "":
		return errors.New("must not be empty")
	case !strings.HasSuffix(p, "."):
		return errors.New("must end in '.'")
	case strings.HasPrefix(p, "$"):
		return errors.New("must not start with '$' (NATS system and API subjects)")
	case !subjectPrefixRE.MatchString(p):
		return errors.New("must be dot-separated subject tokens without spaces or wildcards")
	}
	for _, r := range reservedSubjects {
		if strings.HasPrefix(p, r) || strings.HasPrefix(r, p) {
			return fmt.Errorf("must not overlap %s>, which detour consumes or serves: a result published there would be taken as a request (use a prefix of your own, such as detour.results. or _INBOX.)", r)
		}
	}
	return nil
}

// natsSchemes are the URL schemes nats.go dials.
var natsSchemes = []string{"nats", "tls", "ws", "wss"}

// checkNATSURLs checks DETOUR_NATS_URL as nats.go v1.55 reads it: empty
// entries are skipped, and websocket servers cannot be mixed with others.
// The user part of a URL, a password or a token, is never shown.
func checkNATSURLs(list string) error {
	servers, websocket := 0, 0
	for i, server := range strings.Split(list, ",") {
		server = strings.TrimSpace(server)
		if server == "" {
			continue
		}
		servers++
		raw := server
		if !strings.Contains(raw, "://") {
			raw = "nats://" + raw
		}
		u, err := url.Parse(raw)
		if err != nil {
			return fmt.Errorf("server %d is not a URL such as nats://host:4222", i+1)
		}
		shown := text.URL(raw)
		switch port := u.Port(); {
		case !slices.Contains(natsSchemes, u.Scheme):
			return fmt.Errorf("server %d %q: scheme must be nats, tls, ws or wss", i+1, shown)
		case u.Hostname() == "":
			return fmt.Errorf("server %d %q: has no host", i+1, shown)
		case port != "":
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				return fmt.Errorf("server %d %q: port must be a number from 1 to 65535", i+1, shown)
			}
		}
		if u.Scheme == "ws" || u.Scheme == "wss" {
			websocket++
		}
	}
	switch {
	case servers == 0:
		return errors.New("names no server (set it to a URL such as nats://host:4222, or unset it for the embedded server)")
	case websocket > 0 && websocket < servers:
		return errors.New("mixes websocket servers (ws, wss) with others, which nats.go refuses")
	}
	return nil
}

// checkHostPort checks a host:port whose port is from minPort to 65535.
func checkHostPort(addr string, minPort int) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("must be host:port (got %q)", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < minPort || n > 65535 {
		return fmt.Errorf("port must be a number from %d to 65535 (got %q)", minPort, port)
	}
	return nil
}

// logLevels are DETOUR_LOG_LEVEL's words; slog.Level's own parsing would
// take "info+2" too.
var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

// SlogLevel returns DETOUR_LOG_LEVEL as a slog level; a value Validate would
// reject maps to info.
func (s Settings) SlogLevel() slog.Level {
	if l, ok := logLevels[strings.ToLower(s.LogLevel)]; ok {
		return l
	}
	return slog.LevelInfo
}

// ChainFile is the chain file a command reads: override (its -config flag)
// when it is set, else DETOUR_CONFIG, else that setting's default. It reads
// no other setting, so `processor check`, which needs only the chain file,
// runs whatever the others say.
func ChainFile(override string) string {
	if override != "" {
		return override
	}
	f, _ := reflect.TypeFor[Settings]().FieldByName("Config")
	if v, ok := os.LookupEnv(f.Tag.Get("envconfig")); ok {
		return v
	}
	return f.Tag.Get("default")
}

// ClientURL is where client commands connect: DETOUR_NATS_URL, or when it is
// empty the embedded server at DETOUR_LISTEN. A wildcard listen host
// (":4222", "0.0.0.0:4222") is reached through loopback.
func (s Settings) ClientURL() string {
	if s.NATSURL != "" {
		return s.NATSURL
	}
	host, port, err := net.SplitHostPort(s.Listen)
	if err != nil {
		return "nats://" + s.Listen
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "nats://" + net.JoinHostPort(host, port)
}

// PrintUsage writes a table of every DETOUR_* variable with the kind of
// value it takes, its default and description to w (for "processor -help").
// The kinds are in the words of docs/settings.md, not Go's.
func PrintUsage(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 1, 0, 2, ' ', 0)
	fmt.Fprint(tw, "Environment variables:\n\nVARIABLE\tKIND\tDEFAULT\tDESCRIPTION\n")
	t := reflect.TypeFor[Settings]()
	for i := range t.NumField() {
		f := t.Field(i)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Tag.Get("envconfig"), valueKind(f.Type), f.Tag.Get("default"), f.Tag.Get("desc"))
	}
	return tw.Flush()
}

// valueKind names what a setting of type t takes.
func valueKind(t reflect.Type) string {
	switch {
	case t == durationType:
		return "duration"
	case t.Kind() == reflect.Slice:
		return "list, comma-separated"
	case wholeNumber(t):
		return "whole number"
	}
	return "text"
}
