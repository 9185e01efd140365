package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The chain file as written, decoded by a yaml.Decoder that refuses unknown
// keys. Each mapping's keys are in the order of docs/settings.md, the order
// the hints list them in. Tunables are pointers, so that a key left out
// takes its default and an explicit 0 is kept.
type rawFile struct {
	Providers []rawProvider       `yaml:"providers"`
	Chains    map[string]rawChain `yaml:"chains"`
}

type rawProvider struct {
	Name             string       `yaml:"name"`
	Type             ProviderType `yaml:"type"`
	BaseURL          string       `yaml:"base_url"`
	Model            string       `yaml:"model"`
	APIKeyEnv        string       `yaml:"api_key_env"`
	Timeout          *duration    `yaml:"timeout"`
	MaxRetries       *count       `yaml:"max_retries"`
	BackoffBase      *duration    `yaml:"backoff_base"`
	BackoffMax       *duration    `yaml:"backoff_max"`
	MaxRetryWait     *duration    `yaml:"max_retry_wait"`
	FailureThreshold *count       `yaml:"failure_threshold"`
	Cooldown         *duration    `yaml:"cooldown"`
	MaxCooldown      *duration    `yaml:"max_cooldown"`
	TripWindow       *duration    `yaml:"trip_window"`
	AuthCooldown     *duration    `yaml:"auth_cooldown"`
	Rules            []Rule       `yaml:"rules"`
	DefaultReply     string       `yaml:"default_reply"`
	Price            *rawPrice    `yaml:"price"`
}

// rawPrice keeps a key left out apart from 0: it is refused, not taken as
// free, so that a forgotten key is not a silent zero in the cost metrics.
type rawPrice struct {
	InputPerMTok  *float64 `yaml:"input_per_mtok"`
	OutputPerMTok *float64 `yaml:"output_per_mtok"`
}

// rawChain is a chain written as a list of provider names or as a mapping
// with its providers and response cache.
type rawChain struct {
	Providers names     `yaml:"providers"`
	CacheTTL  *duration `yaml:"cache_ttl"`
	StaleTTL  *duration `yaml:"stale_ttl"`
	// errs are yaml's errors about the chain's values: returned, they
	// would make yaml drop the chain, and validation report it missing.
	errs []string
}

// names is a chain's providers; the type gives yaml's errors about it
// their own message (see shapes).
type names []string

// UnmarshalYAML reads either form of a chain. A Decoder's KnownFields does
// not reach a node decoded here, so the mapping's keys are checked here, in
// yaml's words, which decode turns into the file's.
func (c *rawChain) UnmarshalYAML(n *yaml.Node) error {
	var err error
	switch n.Kind {
	case yaml.SequenceNode:
		err = n.Decode(&c.Providers)
	case yaml.MappingNode:
		known := keys(reflect.TypeFor[rawChain]())
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; k.ShortTag() != "!!merge" && !slices.Contains(known, k.Value) {
				c.errs = append(c.errs, fmt.Sprintf("line %d: field %s not found in type config.rawChain", k.Line, k.Value))
			}
		}
		type plain rawChain // without this method
		err = n.Decode((*plain)(c))
	default:
		return refusal(n, "config.rawChain")
	}
	if te := (*yaml.TypeError)(nil); errors.As(err, &te) {
		c.errs, err = append(c.errs, te.Errors...), nil
	}
	return err
}

// duration is a Go duration string ("500ms", "30s", "10m") or a bare 0;
// yaml itself would take a bare 30 for 30ns.
type duration time.Duration

func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!str" && n.ShortTag() != "!!int") || err != nil {
		return refusal(n, "config.duration")
	}
	*d = duration(v)
	return nil
}

// count is a whole number as YAML 1.2 and the settings read it: yaml.v3
// reads 010 as eight and 08 as a float, and 1_0 as ten, as YAML 1.1 did,
// and would truncate 1.5 to 1.
type count int

var decimalRE = regexp.MustCompile(`^[-+]?[0-9]+$`)

func (c *count) UnmarshalYAML(n *yaml.Node) error {
	base := 0 // 0x10, 0o10
	if decimalRE.MatchString(n.Value) {
		base = 10
	}
	v, err := strconv.ParseInt(n.Value, base, strconv.IntSize)
	switch tag := n.ShortTag(); {
	case tag != "!!int" && tag != "!!float" || strings.Contains(n.Value, "_") || errors.Is(err, strconv.ErrSyntax):
		return refusal(n, "config.count")
	case err != nil:
		return refusal(n, "int64")
	}
	*c = count(v)
	return nil
}

// refusal is the error yaml gives for a value it cannot decode into the
// type called into, so that decode places it as it places yaml's own.
func refusal(n *yaml.Node, into string) error {
	value := ""
	if n.Kind == yaml.ScalarNode {
		value = " `" + yamlValue(n.Value) + "`"
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: cannot unmarshal %s%s into %s", n.Line, n.ShortTag(), value, into)}}
}

// yamlValue is a value as yaml's errors quote it.
func yamlValue(v string) string {
	if len(v) > 10 {
		return v[:7] + "..."
	}
	return v
}

// decode reads a chain file. The file is nil when the YAML could not be
// read at all; otherwise it holds what could be read, and the report the
// problems found and where every place is.
func decode(data []byte) (*rawFile, *report) {
	r := &report{at: map[string]int{}, refused: map[string]bool{}, quiet: map[string]bool{}, unsure: map[string]bool{}}
	if line, what, ok := notText(data); ok {
		// The YAML parser says so without a place.
		r.problems = append(r.problems, problem{line: line, text: "not valid YAML: " + what})
		return nil, r
	}
	// The tree first, for the line of every place; then the structs.
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc, extra yaml.Node
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		r.fatal(err)
		return nil, r
	}
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		r.fatal(err)
	default:
		r.problems = append(r.problems, problem{line: extra.Line, text: "only one YAML document is allowed (remove the second ---)"})
	}
	var raw rawFile
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	err := strict.Decode(&raw)
	te := (*yaml.TypeError)(nil)
	if err != nil && !errors.As(err, &te) && !errors.Is(err, io.EOF) {
		r.problems = nil // excessive aliasing, say: that is the file's problem
		r.fatal(err)
		return nil, r
	}
	if len(doc.Content) > 0 {
		r.record(entry{path: path{}, value: doc.Content[0]})
		r.walk(doc.Content[0], path{}, nil)
	}
	var errs []string
	if te != nil {
		errs = te.Errors
	}
	for _, name := range slices.Sorted(maps.Keys(raw.Chains)) {
		errs = append(errs, raw.Chains[name].errs...)
	}
	for _, e := range errs {
		r.yamlError(e)
	}
	return &raw, r
}

// build applies defaults and resolves API keys; it does not validate.
func (raw *rawFile) build(lookupEnv func(string) (string, bool), r *report) *File {
	f := &File{Chains: map[string][]string{}, Caches: map[string]ChainCache{}}
	for name, rc := range raw.Chains {
		f.Chains[name] = rc.Providers
		c := ChainCache{TTL: or((*time.Duration)(rc.CacheTTL), 0), StaleTTL: or((*time.Duration)(rc.StaleTTL), 0)}
		if rc.StaleTTL == nil && c.TTL > 0 {
			c.StaleTTL = DefaultStaleTTL
		}
		if c != (ChainCache{}) {
			f.Caches[name] = c
		}
	}
	d := func(v *duration, def time.Duration) time.Duration { return or((*time.Duration)(v), def) }
	for i, rp := range raw.Providers {
		p := Provider{
			Name:             rp.Name,
			Type:             rp.Type,
			BaseURL:          cmp.Or(strings.TrimRight(rp.BaseURL, "/"), defaultBaseURL[rp.Type]),
			Model:            rp.Model,
			APIKeyEnv:        rp.APIKeyEnv,
			Timeout:          d(rp.Timeout, DefaultTimeout),
			MaxRetries:       or((*int)(rp.MaxRetries), DefaultMaxRetries),
			BackoffBase:      d(rp.BackoffBase, DefaultBackoffBase),
			BackoffMax:       d(rp.BackoffMax, DefaultBackoffMax),
			MaxRetryWait:     d(rp.MaxRetryWait, DefaultMaxRetryWait),
			FailureThreshold: or((*int)(rp.FailureThreshold), DefaultFailureThreshold),
			Cooldown:         d(rp.Cooldown, DefaultCooldown),
			MaxCooldown:      d(rp.MaxCooldown, DefaultMaxCooldown),
			TripWindow:       d(rp.TripWindow, DefaultTripWindow),
			AuthCooldown:     d(rp.AuthCooldown, DefaultAuthCooldown),
			Rules:            rp.Rules,
			DefaultReply:     rp.DefaultReply,
		}
		if pr := rp.Price; pr != nil {
			// A key left out is refused here, so its 0 never leaves Parse.
			p.Price = &Price{InputPerMTok: or(pr.InputPerMTok, 0), OutputPerMTok: or(pr.OutputPerMTok, 0)}
			at := path{"providers", strconv.Itoa(i), "price"}
			if pr.InputPerMTok == nil {
				r.later = append(r.later, problem{path: at.child("input_per_mtok"), text: "required (0 for free)"})
			}
			if pr.OutputPerMTok == nil {
				r.later = append(r.later, problem{path: at.child("output_per_mtok"), text: "required (0 for free)"})
			}
		}
		if p.APIKeyEnv != "" && envNameRE.MatchString(p.APIKeyEnv) {
			v, _ := lookupEnv(p.APIKeyEnv)
			// Keys pasted with a stray newline or space would only fail later
			// as an invalid HTTP header.
			p.APIKey = strings.TrimSpace(v)
		}
		f.Providers = append(f.Providers, p)
	}
	return f
}

var defaultBaseURL = map[ProviderType]string{TypeOpenAI: DefaultOpenAIBaseURL, TypeAnthropic: DefaultAnthropicBaseURL}

func or[T any](v *T, def T) T {
	if v == nil {
		return def
	}
	return *v
}
