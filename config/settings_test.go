package config

import (
	"bytes"
	"errors"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"
)

// envKeys lists the variable names from the struct tags, so the tests follow
// the struct instead of repeating it.
func envKeys(t *testing.T) []string {
	t.Helper()
	var keys []string
	typ := reflect.TypeFor[Settings]()
	for i := range typ.NumField() {
		keys = append(keys, typ.Field(i).Tag.Get("envconfig"))
	}
	return keys
}

// clearEnv unsets every DETOUR_* variable (restored after the test) so the
// host's environment cannot leak into a test.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, k := range envKeys(t) {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

func defaultSettings() Settings {
	return Settings{
		NATSPingInterval:     5 * time.Second,
		NATSMaxPingsOut:      2,
		Listen:               "127.0.0.1:4222",
		DataDir:              "./detour-data",
		Config:               "detour.yaml",
		Workers:              64,
		Replicas:             1,
		AckWait:              30 * time.Second,
		MaxAckPending:        1000,
		RequestTTL:           24 * time.Hour,
		ResultTTL:            24 * time.Hour,
		ReplyPrefixes:        []string{"detour.results.", "_INBOX."},
		MaxPayload:           1048576,
		RequestsMaxBytes:     256 << 20,
		ResultsMaxBytes:      1 << 30,
		DeadLetterMaxBytes:   512 << 20,
		MetricsAddr:          "127.0.0.1:9464",
		LogLevel:             "info",
		LogFormat:            "text",
		MaxInvalidDeliveries: 3,
		ShutdownTimeout:      30 * time.Second,
	}
}

func TestSettingsTags(t *testing.T) {
	typ := reflect.TypeFor[Settings]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if k := f.Tag.Get("envconfig"); !strings.HasPrefix(k, "DETOUR_") {
			t.Errorf("%s: envconfig tag %q does not start with DETOUR_", f.Name, k)
		}
		if f.Tag.Get("desc") == "" {
			t.Errorf("%s: no desc tag", f.Name)
		}
	}
}

func TestLoadSettingsDefaults(t *testing.T) {
	clearEnv(t)
	s, err := LoadSettings()
	if err != nil {
		t.Fatal(err)
	}
	if want := defaultSettings(); !reflect.DeepEqual(s, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", s, want)
	}
}

// TestDefaultPingsNoticeAPartitionWithinAnAckWait: a connection the network
// stopped carrying is noticed after at most (pings out + 1) ping intervals;
// by default that is well within one AckWait, so that a processor cut off
// knows it, and reconnects, before its deliveries are redelivered.
func TestDefaultPingsNoticeAPartitionWithinAnAckWait(t *testing.T) {
	s := defaultSettings()
	if noticed := time.Duration(s.NATSMaxPingsOut+1) * s.NATSPingInterval; noticed > s.AckWait/2 {
		t.Errorf("a partition goes unnoticed for up to %s, more than half the default AckWait of %s", noticed, s.AckWait)
	}
}

func TestLoadSettingsOverrides(t *testing.T) {
	tests := []struct {
		env   map[string]string
		check func(Settings) bool
	}{
		{map[string]string{"DETOUR_NATS_URL": "nats://a:4222,nats://b:4222"}, func(s Settings) bool { return s.NATSURL == "nats://a:4222,nats://b:4222" }},
		{map[string]string{"DETOUR_NATS_CREDS": "/x.creds"}, func(s Settings) bool { return s.NATSCreds == "/x.creds" }},
		{map[string]string{"DETOUR_NATS_TLS_CA": "ca.pem"}, func(s Settings) bool { return s.NATSTLSCA == "ca.pem" }},
		{map[string]string{"DETOUR_NATS_TLS_CERT": "c.pem", "DETOUR_NATS_TLS_KEY": "k.pem"}, func(s Settings) bool { return s.NATSTLSCert == "c.pem" && s.NATSTLSKey == "k.pem" }},
		{map[string]string{"DETOUR_NATS_PING_INTERVAL": "1s", "DETOUR_NATS_MAX_PINGS_OUT": "3"}, func(s Settings) bool {
			return s.NATSPingInterval == time.Second && s.NATSMaxPingsOut == 3
		}},
		{map[string]string{"DETOUR_LISTEN": "0.0.0.0:5222"}, func(s Settings) bool { return s.Listen == "0.0.0.0:5222" }},
		{map[string]string{"DETOUR_DATA_DIR": "/var/lib/detour"}, func(s Settings) bool { return s.DataDir == "/var/lib/detour" }},
		{map[string]string{"DETOUR_CONFIG": "/etc/detour.yaml"}, func(s Settings) bool { return s.Config == "/etc/detour.yaml" }},
		{map[string]string{"DETOUR_WORKERS": "8"}, func(s Settings) bool { return s.Workers == 8 }},
		{map[string]string{"DETOUR_WORKERS": "010"}, func(s Settings) bool { return s.Workers == 10 }},
		{map[string]string{"DETOUR_WORKERS": "08"}, func(s Settings) bool { return s.Workers == 8 }},
		{map[string]string{"DETOUR_WORKERS": "019"}, func(s Settings) bool { return s.Workers == 19 }},
		{map[string]string{"DETOUR_REPLICAS": "3"}, func(s Settings) bool { return s.Replicas == 3 }},
		{map[string]string{"DETOUR_ACK_WAIT": "1m"}, func(s Settings) bool { return s.AckWait == time.Minute }},
		{map[string]string{"DETOUR_MAX_ACK_PENDING": "5"}, func(s Settings) bool { return s.MaxAckPending == 5 }},
		{map[string]string{"DETOUR_REQUEST_TTL": "2h"}, func(s Settings) bool { return s.RequestTTL == 2*time.Hour }},
		{map[string]string{"DETOUR_RESULT_TTL": "90m"}, func(s Settings) bool { return s.ResultTTL == 90*time.Minute }},
		{map[string]string{"DETOUR_REPLY_PREFIXES": "app.replies., _INBOX."}, func(s Settings) bool {
			return slices.Equal(s.ReplyPrefixes, []string{"app.replies.", "_INBOX."})
		}},
		{map[string]string{"DETOUR_MAX_PAYLOAD": "2048"}, func(s Settings) bool { return s.MaxPayload == 2048 }},
		{map[string]string{"DETOUR_REQUESTS_MAX_BYTES": "1048576", "DETOUR_RESULTS_MAX_BYTES": "4194304", "DETOUR_DEADLETTER_MAX_BYTES": "2097152"},
			func(s Settings) bool {
				return s.RequestsMaxBytes == 1<<20 && s.ResultsMaxBytes == 4<<20 && s.DeadLetterMaxBytes == 2<<20
			}},
		{map[string]string{"DETOUR_METRICS_ADDR": ""}, func(s Settings) bool { return s.MetricsAddr == "" }},
		{map[string]string{"DETOUR_LOG_LEVEL": "DEBUG"}, func(s Settings) bool { return s.LogLevel == "debug" }},
		{map[string]string{"DETOUR_LOG_FORMAT": "json"}, func(s Settings) bool { return s.LogFormat == LogFormatJSON }},
		{map[string]string{"DETOUR_SHUTDOWN_TIMEOUT": "5s"}, func(s Settings) bool { return s.ShutdownTimeout == 5*time.Second }},
		{map[string]string{"DETOUR_MAX_INVALID_DELIVERIES": "1"}, func(s Settings) bool { return s.MaxInvalidDeliveries == 1 }},
		// Bare names must not leak in (envconfig's fallback when a prefix is used).
		{map[string]string{"WORKERS": "7", "LOG_LEVEL": "bogus", "CONFIG": "x"}, func(s Settings) bool {
			return s.Workers == 64 && s.LogLevel == "info" && s.Config == "detour.yaml"
		}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(slices.Sorted(maps.Keys(tt.env)), ","), func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			s, err := LoadSettings()
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(s) {
				t.Errorf("got %+v", s)
			}
		})
	}
}

// TestLoadSettingsErrors: a value that cannot be read is reported in the
// words of docs/settings.md, not the library's or Go's.
func TestLoadSettingsErrors(t *testing.T) {
	for _, tt := range []struct{ key, value, want string }{
		{"DETOUR_WORKERS", "abc", `DETOUR_WORKERS: "abc" is not a whole number`},
		{"DETOUR_WORKERS", "1.5", `DETOUR_WORKERS: "1.5" is not a whole number`},
		{"DETOUR_WORKERS", "99999999999999999999", `DETOUR_WORKERS: "99999999999999999999" is out of range`},
		{"DETOUR_WORKERS", "", `DETOUR_WORKERS: is set but empty: give a whole number, or unset it for the default 64`},
		{"DETOUR_WORKERS", "0", `DETOUR_WORKERS: must be from 1 to 10000`},
		// Decimal only: Go's base prefixes would read 010 as 8.
		{"DETOUR_WORKERS", "010x", `DETOUR_WORKERS: "010x" is not a whole number`},
		{"DETOUR_WORKERS", "0x10", `DETOUR_WORKERS: "0x10" is not a whole number in decimal digits`},
		{"DETOUR_WORKERS", "0b11", `DETOUR_WORKERS: "0b11" is not a whole number in decimal digits`},
		{"DETOUR_WORKERS", "1_0", `DETOUR_WORKERS: "1_0" is not a whole number in decimal digits`},
		{"DETOUR_ACK_WAIT", "30", `DETOUR_ACK_WAIT: "30" is not a duration: give a unit, such as 30s`},
		{"DETOUR_ACK_WAIT", "soon", `DETOUR_ACK_WAIT: "soon" is not a duration such as 500ms, 30s or 10m`},
		{"DETOUR_MAX_INVALID_DELIVERIES", "-1", `DETOUR_MAX_INVALID_DELIVERIES: "-1" must not be negative`},
		{"DETOUR_REPLICAS", "9", `DETOUR_REPLICAS: must be between 1 and 5`},
		{"DETOUR_LOG_LEVEL", "loud", `DETOUR_LOG_LEVEL: must be one of debug, info, warn, error (got "loud")`},
	} {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(tt.key, tt.value)
			_, err := LoadSettings()
			var se *SettingsError
			if !errors.As(err, &se) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("LoadSettings() = %v, want a *SettingsError", err)
			}
			if want := "1 setting refused:\n  " + tt.want; err.Error() != want {
				t.Errorf("error:\n%s\nwant:\n%s", err, want)
			}
		})
	}
}

// TestLoadSettingsReportsEveryVariable: every bad variable is reported at
// once, those that cannot be read as those that are out of bounds, each once.
func TestLoadSettingsReportsEveryVariable(t *testing.T) {
	clearEnv(t)
	t.Setenv("DETOUR_WORKERS", "abc")
	t.Setenv("DETOUR_ACK_WAIT", "x")
	t.Setenv("DETOUR_REPLICAS", "9")
	t.Setenv("DETOUR_LOG_FORMAT", "xml")
	_, err := LoadSettings()
	const want = `4 settings refused:
  DETOUR_WORKERS: "abc" is not a whole number
  DETOUR_ACK_WAIT: "x" is not a duration such as 500ms, 30s or 10m
  DETOUR_REPLICAS: must be between 1 and 5
  DETOUR_LOG_FORMAT: must be text or json (got "xml")`
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}
}

// TestLoadSettingsAgreesWithEnvconfig: read one variable at a time, the
// settings are what envconfig makes of the whole struct.
func TestLoadSettingsAgreesWithEnvconfig(t *testing.T) {
	clearEnv(t)
	for k, v := range map[string]string{
		"DETOUR_WORKERS": "16", "DETOUR_ACK_WAIT": "1m30s", "DETOUR_REPLY_PREFIXES": "a.,b.",
		"DETOUR_MAX_INVALID_DELIVERIES": "7", "DETOUR_METRICS_ADDR": "", "DETOUR_NATS_URL": "nats://x:4222",
	} {
		t.Setenv(k, v)
	}
	got, err := LoadSettings()
	if err != nil {
		t.Fatal(err)
	}
	var want Settings
	if err := envconfig.Process("", &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("LoadSettings() = %+v\nenvconfig:     %+v", got, want)
	}
}

func TestSettingsValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Settings)
		want   string // "" means valid
	}{
		{"defaults", func(*Settings) {}, ""},
		{"workers 0", func(s *Settings) { s.Workers = 0 }, "DETOUR_WORKERS: must be from 1 to 10000"},
		{"workers at the most", func(s *Settings) { s.Workers = MaxWorkers }, ""},
		{"workers past the most", func(s *Settings) { s.Workers = MaxWorkers + 1 }, "DETOUR_WORKERS: must be from 1 to 10000"},
		{"workers a billion", func(s *Settings) { s.Workers = 1_000_000_000 }, "DETOUR_WORKERS: must be from 1 to 10000"},
		{"replicas 0", func(s *Settings) { s.Replicas = 0 }, "DETOUR_REPLICAS: must be between 1 and 5"},
		{"replicas 6", func(s *Settings) { s.Replicas = 6 }, "DETOUR_REPLICAS: must be between 1 and 5"},
		{"replicas 5", func(s *Settings) { s.Replicas = 5 }, ""},
		{"ack wait short", func(s *Settings) { s.AckWait = 999 * time.Millisecond }, "DETOUR_ACK_WAIT: must be at least 1s"},
		{"ack wait 1s", func(s *Settings) { s.AckWait = time.Second }, ""},
		{"max ack pending", func(s *Settings) { s.MaxAckPending = 0 }, "DETOUR_MAX_ACK_PENDING: must be at least 1"},
		{"request ttl", func(s *Settings) { s.RequestTTL = 0 }, "DETOUR_REQUEST_TTL: must be at least 1s"},
		{"request ttl 1ms", func(s *Settings) { s.RequestTTL = time.Millisecond }, "DETOUR_REQUEST_TTL: must be at least 1s"},
		{"request ttl 1s", func(s *Settings) { s.RequestTTL = time.Second }, ""},
		{"result ttl", func(s *Settings) { s.ResultTTL = -time.Second }, "DETOUR_RESULT_TTL: must be at least 1s"},
		{"result ttl 10ms", func(s *Settings) { s.ResultTTL = 10 * time.Millisecond }, "DETOUR_RESULT_TTL: must be at least 1s"},
		{"max payload", func(s *Settings) { s.MaxPayload = 0 }, "DETOUR_MAX_PAYLOAD: must be positive"},
		{"shutdown", func(s *Settings) { s.ShutdownTimeout = 0 }, "DETOUR_SHUTDOWN_TIMEOUT: must be positive"},
		{"requests below a request", func(s *Settings) { s.RequestsMaxBytes = 1<<20 - 1 }, "DETOUR_REQUESTS_MAX_BYTES: must be at least DETOUR_MAX_PAYLOAD (1048576)"},
		{"requests at a request", func(s *Settings) { s.RequestsMaxBytes = 1 << 20 }, ""},
		{"results below a result", func(s *Settings) { s.ResultsMaxBytes = 1000 }, "DETOUR_RESULTS_MAX_BYTES: must be at least 1048576"},
		{"dead letters below the requests", func(s *Settings) { s.DeadLetterMaxBytes = s.RequestsMaxBytes - 1 },
			"DETOUR_DEADLETTER_MAX_BYTES: must be at least DETOUR_REQUESTS_MAX_BYTES (268435456)"},
		{"dead letters at the requests", func(s *Settings) { s.DeadLetterMaxBytes = s.RequestsMaxBytes }, ""},
		{"max invalid deliveries", func(s *Settings) { s.MaxInvalidDeliveries = 0 }, "DETOUR_MAX_INVALID_DELIVERIES: must be at least 1"},
		{"no prefixes", func(s *Settings) { s.ReplyPrefixes = nil }, "DETOUR_REPLY_PREFIXES: must list at least one prefix"},
		{"empty prefix", func(s *Settings) { s.ReplyPrefixes = []string{"a.", ""} }, `DETOUR_REPLY_PREFIXES: prefix 2 "": must not be empty`},
		{"prefix without dot", func(s *Settings) { s.ReplyPrefixes = []string{"replies"} }, "must end in '.'"},
		{"prefix $JS", func(s *Settings) { s.ReplyPrefixes = []string{"$JS.API."} }, "DETOUR_REPLY_PREFIXES: prefix 1 \"$JS.API.\": must not start with '$'"},
		{"prefix wildcard", func(s *Settings) { s.ReplyPrefixes = []string{"a.*."} }, "DETOUR_REPLY_PREFIXES"},
		{"prefix loops", func(s *Settings) { s.ReplyPrefixes = []string{"detour."} }, "must not overlap detour.requests.>"},
		{"prefix deadletter", func(s *Settings) { s.ReplyPrefixes = []string{"detour.deadletter.x."} }, "must not overlap detour.deadletter.>"},
		{"prefix ask", func(s *Settings) { s.ReplyPrefixes = []string{"detour.ask."} }, "must not overlap detour.ask.>"},
		{"prefix a chain's endpoint", func(s *Settings) { s.ReplyPrefixes = []string{"detour.ask.default."} }, "must not overlap detour.ask.>"},
		{"log level", func(s *Settings) { s.LogLevel = "trace" }, "DETOUR_LOG_LEVEL: must be one of debug, info, warn, error"},
		{"log format", func(s *Settings) { s.LogFormat = "xml" }, "DETOUR_LOG_FORMAT: must be text or json"},
		{"listen", func(s *Settings) { s.Listen = "4222" }, "DETOUR_LISTEN: must be host:port"},
		{"listen port", func(s *Settings) { s.Listen = "localhost:http" }, "DETOUR_LISTEN: port must be a number"},
		// Port 0 would be a port no client command could find (nats-server
		// even reads it as its default, 4222).
		{"listen port 0", func(s *Settings) { s.Listen = "127.0.0.1:0" }, "DETOUR_LISTEN: port must be a number from 1 to 65535"},
		{"metrics port 0", func(s *Settings) { s.MetricsAddr = "127.0.0.1:0" }, ""},
		{"metrics", func(s *Settings) { s.MetricsAddr = "nope" }, "DETOUR_METRICS_ADDR: must be host:port"},
		{"metrics disabled", func(s *Settings) { s.MetricsAddr = "" }, ""},
		{"nats url blank", func(s *Settings) { s.NATSURL = " " }, "DETOUR_NATS_URL: names no server"},
		{"nats url commas", func(s *Settings) { s.NATSURL = " , ," }, "DETOUR_NATS_URL: names no server"},
		{"nats url trailing comma", func(s *Settings) { s.NATSURL = "nats://a:4222," }, ""},
		{"nats url port", func(s *Settings) { s.NATSURL = "nats://127.0.0.1:99999" }, `DETOUR_NATS_URL: server 1 "nats://127.0.0.1:99999": port must be a number from 1 to 65535`},
		{"nats url scheme", func(s *Settings) { s.NATSURL = "http://127.0.0.1:4222" }, `DETOUR_NATS_URL: server 1 "http://127.0.0.1:4222": scheme must be nats, tls, ws or wss`},
		{"nats url password hidden", func(s *Settings) { s.NATSURL = "nats://u:hunter2@h:0" }, `DETOUR_NATS_URL: server 1 "nats://xxxxx@h:0": port`},
		{"nats url token hidden", func(s *Settings) { s.NATSURL = "nats://s3cr3tT0ken@h:99999" }, `DETOUR_NATS_URL: server 1 "nats://xxxxx@h:99999": port`},
		{"nats url mixed websocket", func(s *Settings) { s.NATSURL = "nats://a:4222,ws://b" }, "DETOUR_NATS_URL: mixes websocket servers"},
		{"nats url list", func(s *Settings) { s.NATSURL = "nats://u:p@a:4222, tls://b:4443,c:4222" }, ""},
		{"nats url websockets", func(s *Settings) { s.NATSURL = "ws://a:8080,wss://b" }, ""},
		{"ping interval short", func(s *Settings) { s.NATSPingInterval = 99 * time.Millisecond }, "DETOUR_NATS_PING_INTERVAL: must be at least 100ms"},
		{"ping interval 100ms", func(s *Settings) { s.NATSPingInterval = 100 * time.Millisecond }, ""},
		{"pings out", func(s *Settings) { s.NATSMaxPingsOut = 0 }, "DETOUR_NATS_MAX_PINGS_OUT: must be at least 1"},
		{"tls half", func(s *Settings) { s.NATSTLSCert = "c.pem" }, "DETOUR_NATS_TLS_CERT: must be set together with DETOUR_NATS_TLS_KEY"},
		{"data dir", func(s *Settings) { s.DataDir = "" }, "DETOUR_DATA_DIR: must not be empty"},
		{"data dir blank", func(s *Settings) { s.DataDir = " \t" }, "DETOUR_DATA_DIR: must not be empty"},
		{"config blank", func(s *Settings) { s.Config = " " }, "DETOUR_CONFIG: must not be empty"},
		{"config", func(s *Settings) { s.Config = "" }, "DETOUR_CONFIG: must not be empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := defaultSettings()
			tt.modify(&s)
			err := s.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate() = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestSettingsValidateReportsAll(t *testing.T) {
	s := defaultSettings()
	s.Workers, s.Replicas, s.LogFormat = 0, 0, "xml"
	err := s.Validate()
	for _, key := range []string{"DETOUR_WORKERS", "DETOUR_REPLICAS", "DETOUR_LOG_FORMAT"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("Validate() = %v, want it to name %s", err, key)
		}
	}
}

func TestSlogLevel(t *testing.T) {
	for level, want := range map[string]slog.Level{
		"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn,
		"error": slog.LevelError, "WARN": slog.LevelWarn, "": slog.LevelInfo, "bogus": slog.LevelInfo,
	} {
		if got := (Settings{LogLevel: level}).SlogLevel(); got != want {
			t.Errorf("SlogLevel(%q) = %v, want %v", level, got, want)
		}
	}
}

func TestClientURL(t *testing.T) {
	tests := []struct{ url, listen, want string }{
		{"nats://remote:4222", "127.0.0.1:4222", "nats://remote:4222"},
		{"", "127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"", ":5222", "nats://127.0.0.1:5222"},
		{"", "0.0.0.0:5222", "nats://127.0.0.1:5222"},
		{"", "[::]:5222", "nats://[::1]:5222"},
		{"", "[::1]:5222", "nats://[::1]:5222"},
		{"", "nats.local:4222", "nats://nats.local:4222"},
	}
	for _, tt := range tests {
		s := Settings{NATSURL: tt.url, Listen: tt.listen}
		if got := s.ClientURL(); got != tt.want {
			t.Errorf("ClientURL(%q, %q) = %q, want %q", tt.url, tt.listen, got, tt.want)
		}
	}
}

// TestChainFile: a -config flag overrides DETOUR_CONFIG, which defaults to
// detour.yaml.
func TestChainFile(t *testing.T) {
	clearEnv(t)
	if got := ChainFile(""); got != "detour.yaml" {
		t.Errorf("ChainFile(\"\") without DETOUR_CONFIG = %q, want detour.yaml", got)
	}
	if got := ChainFile("flag.yaml"); got != "flag.yaml" {
		t.Errorf("ChainFile(flag.yaml) = %q", got)
	}
	t.Setenv("DETOUR_CONFIG", "/etc/detour/chains.yaml")
	t.Setenv("DETOUR_WORKERS", "0") // another setting, invalid, is not read
	if got := ChainFile(""); got != "/etc/detour/chains.yaml" {
		t.Errorf("ChainFile(\"\") with DETOUR_CONFIG set = %q", got)
	}
	if got := ChainFile("flag.yaml"); got != "flag.yaml" {
		t.Errorf("ChainFile(flag.yaml) with DETOUR_CONFIG set = %q, want the flag", got)
	}
	t.Setenv("DETOUR_WORKERS", "64")
	s, err := LoadSettings()
	if err != nil {
		t.Fatal(err)
	}
	if s.Config != ChainFile("") {
		t.Errorf("Settings.Config = %q, ChainFile = %q: they must agree", s.Config, ChainFile(""))
	}
}

func TestPrintUsage(t *testing.T) {
	var buf bytes.Buffer
	if err := PrintUsage(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	typ := reflect.TypeFor[Settings]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		line := lineWith(out, f.Tag.Get("envconfig")+" ")
		if line == "" {
			t.Errorf("usage does not list %s:\n%s", f.Tag.Get("envconfig"), out)
			continue
		}
		for _, part := range []string{valueKind(f.Type), f.Tag.Get("default"), f.Tag.Get("desc")} {
			if !strings.Contains(line, part) {
				t.Errorf("usage line %q lacks %q", line, part)
			}
		}
	}
}

// TestUsageKinds: the KIND column speaks the words of docs/settings.md,
// not Go's type names.
func TestUsageKinds(t *testing.T) {
	var buf bytes.Buffer
	if err := PrintUsage(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ key, kind string }{
		{"DETOUR_WORKERS", "whole number"}, {"DETOUR_MAX_INVALID_DELIVERIES", "whole number"},
		{"DETOUR_ACK_WAIT", "duration"}, {"DETOUR_REPLY_PREFIXES", "list, comma-separated"}, {"DETOUR_CONFIG", "text"},
	} {
		if fields := strings.Fields(lineWith(buf.String(), want.key+" ")); len(fields) < 2 || !strings.HasPrefix(strings.Join(fields[1:], " "), want.kind) {
			t.Errorf("%s: %q, want the kind %q", want.key, fields, want.kind)
		}
	}
	for _, goName := range []string{"String", "Integer", "Comma-separated list"} {
		if strings.Contains(buf.String(), goName) {
			t.Errorf("usage names the Go kind %q:\n%s", goName, buf.String())
		}
	}
}

func lineWith(text, prefix string) string {
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}
