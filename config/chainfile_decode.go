package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The chain file as written, decoded by yaml with unknown keys refused.
// The yaml tags list each mapping's keys in the order of docs/settings.md,
// which is also the order the hints list them in.
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
	Timeout          duration     `yaml:"timeout"`
	MaxRetries       count        `yaml:"max_retries"`
	BackoffBase      duration     `yaml:"backoff_base"`
	BackoffMax       duration     `yaml:"backoff_max"`
	MaxRetryWait     duration     `yaml:"max_retry_wait"`
	FailureThreshold count        `yaml:"failure_threshold"`
	Cooldown         duration     `yaml:"cooldown"`
	MaxCooldown      duration     `yaml:"max_cooldown"`
	TripWindow       duration     `yaml:"trip_window"`
	AuthCooldown     duration     `yaml:"auth_cooldown"`
	Rules            []Rule       `yaml:"rules"`
	DefaultReply     string       `yaml:"default_reply"`
	Price            *rawPrice    `yaml:"price"`
}

// rawPrice keeps a key left out apart from 0, so that a forgotten key is
// refused rather than a silent zero in the cost metrics.
type rawPrice struct {
	InputPerMTok  *float64 `yaml:"input_per_mtok"`
	OutputPerMTok *float64 `yaml:"output_per_mtok"`
}

// rawChain is a chain written as a list of provider names or as a mapping
// with its providers and response cache.
type rawChain struct {
	Providers names    `yaml:"providers"`
	CacheTTL  duration `yaml:"cache_ttl"`
	StaleTTL  duration `yaml:"stale_ttl"`
	// errs are yaml's errors about the chain, kept here: yaml would drop
	// a chain that returned them, and then report it missing.
	errs []string
}

// names and chainList are lists of provider names; their own types give
// yaml's errors about them their own messages (see shapes).
type (
	names     []string
	chainList []string
)

// UnmarshalYAML reads either form of a chain. A Decoder's KnownFields does
// not reach a node decoded here, so the mapping's keys are checked here,
// in yaml's words, which decode then turns into the file's.
func (c *rawChain) UnmarshalYAML(n *yaml.Node) error {
	var err error
	if n.Kind != yaml.MappingNode {
		err = n.Decode((*chainList)(&c.Providers))
	} else {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if k := n.Content[i]; !isMerge(k) && !slices.Contains(chainKeys, k.Value) {
				c.errs = append(c.errs, fmt.Sprintf("line %d: field %s not found in type config.rawChain", k.Line, k.Value))
			}
		}
		type plain rawChain // without this method
		err = n.Decode((*plain)(c))
	}
	if te := (*yaml.TypeError)(nil); errors.As(err, &te) {
		c.errs = append(c.errs, te.Errors...)
		return nil
	}
	return err
}

// optional is a tunable as written: v is nil when the key is left out or
// given no value (timeout: ~), so that an explicit 0 (failure_threshold: 0
// disables cooldowns) is kept; bad says why the value written was refused.
type optional[T any] struct {
	v   *T
	bad string
}

func (o optional[T]) or(def T) T { return or(o.v, def) }

func or[T any](v *T, def T) T {
	if v == nil {
		return def
	}
	return *v
}

// duration is a Go duration string ("500ms", "30s", "10m") or a bare 0; yaml
// itself would take a bare 30 for 30ns.
type duration struct{ optional[time.Duration] }

func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!str" || n.ShortTag() == "!!int") {
		if v, err := time.ParseDuration(n.Value); err == nil {
			d.v = &v
			return nil
		}
	}
	d.bad = "must be a duration such as 500ms, 30s or 10m (got " + describe(n) + ")"
	return nil
}

// count is a whole number, read as YAML 1.2 and the settings read it:
// yaml.v3 reads 010 as octal and 08 as a float, and 1_0 as ten, as YAML 1.1
// did, and would truncate 1.5 to 1.
type count struct{ optional[int] }

var decimalRE = regexp.MustCompile(`^[-+]?[0-9]+$`)

func (c *count) UnmarshalYAML(n *yaml.Node) error {
	tag, v := n.ShortTag(), 0
	var err error
	switch {
	case n.Kind != yaml.ScalarNode || (tag != "!!int" && tag != "!!float") || strings.Contains(n.Value, "_"):
		err = errors.New("must be a whole number")
	case decimalRE.MatchString(n.Value):
		var i int64
		i, err = strconv.ParseInt(n.Value, 10, strconv.IntSize)
		v = int(i)
	case tag == "!!int": // 0x10, 0o10
		err = n.Decode(&v)
	default:
		err = errors.New("must be a whole number")
	}
	switch {
	case err == nil:
		c.v = &v
	case strings.HasPrefix(err.Error(), "must"):
		c.bad = err.Error() + " (got " + describe(n) + ")"
	default:
		c.bad = "is too large (got " + describe(n) + ")"
	}
	return nil
}

func isMerge(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!merge" }

// describe names what a node holds, for "(got …)".
func describe(n *yaml.Node) string {
	switch {
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case n.ShortTag() == "!!null":
		return "nothing"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	return strconv.Quote(v)
}

// decode reads a chain file into a rawFile. The file is nil when the YAML
// could not be read at all; otherwise it holds what could be, and the
// report the problems found and the line of every place.
func decode(data []byte) (*rawFile, *report) {
	r := newReport()
	if line, what, ok := notText(data); ok {
		// The YAML parser says so without a place.
		r.add(problem{line: line, text: "not valid YAML: " + what})
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
		r.add(problem{line: extra.Line, text: "only one YAML document is allowed (remove the second ---)"})
	}
	var raw rawFile
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	err := strict.Decode(&raw)
	var te *yaml.TypeError
	switch {
	case errors.As(err, &te):
	case err != nil && !errors.Is(err, io.EOF):
		r.problems = nil // excessive aliasing, say: only that problem stands
		r.fatal(err)
		return nil, r
	}
	if len(doc.Content) > 0 {
		r.record(entry{path: path{}, value: doc.Content[0]})
		r.walk(doc.Content[0], path{}, false, nil)
	}
	if te != nil {
		for _, e := range te.Errors {
			r.yamlError(e)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(raw.Chains)) {
		for _, e := range raw.Chains[name].errs {
			r.yamlError(e)
		}
	}
	return &raw, r
}

// fatal records an error that stopped yaml: not YAML, or not a file it
// could read through.
func (r *report) fatal(err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if msg == "document contains excessive aliasing" {
		r.add(problem{text: "too many aliases: they would expand the file many times over"})
		return
	}
	line := 0
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	r.add(problem{line: line, text: "not valid YAML: " + msg})
}

// build applies defaults and resolves API keys; it does not validate, but
// reports the values refused as written, so that validation can be quiet
// about them.
func (raw *rawFile) build(lookupEnv func(string) (string, bool), r *report) *File {
	f := &File{Providers: make([]Provider, 0, len(raw.Providers)), Chains: map[string][]string{}, Caches: map[string]ChainCache{}}
	refused := func(p path, bad string) {
		if bad != "" {
			r.later = append(r.later, problem{path: p, text: bad})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(raw.Chains)) {
		rc, p := raw.Chains[name], path{"chains", name}
		refused(p.child("cache_ttl"), rc.CacheTTL.bad)
		refused(p.child("stale_ttl"), rc.StaleTTL.bad)
		f.Chains[name] = rc.Providers
		c := ChainCache{TTL: rc.CacheTTL.or(0), StaleTTL: rc.StaleTTL.or(0)}
		if rc.StaleTTL.v == nil && c.TTL > 0 {
			c.StaleTTL = DefaultStaleTTL
		}
		if c != (ChainCache{}) {
			f.Caches[name] = c
		}
	}
	for i, rp := range raw.Providers {
		at := path{"providers", strconv.Itoa(i)}
		p := Provider{
			Name:             rp.Name,
			Type:             rp.Type,
			BaseURL:          strings.TrimRight(rp.BaseURL, "/"),
			Model:            rp.Model,
			APIKeyEnv:        rp.APIKeyEnv,
			MaxRetries:       rp.MaxRetries.or(DefaultMaxRetries),
			FailureThreshold: rp.FailureThreshold.or(DefaultFailureThreshold),
			Rules:            rp.Rules,
			DefaultReply:     rp.DefaultReply,
		}
		refused(at.child("max_retries"), rp.MaxRetries.bad)
		refused(at.child("failure_threshold"), rp.FailureThreshold.bad)
		for _, d := range []struct {
			key string
			raw duration
			def time.Duration
			out *time.Duration
		}{
			{"timeout", rp.Timeout, DefaultTimeout, &p.Timeout},
			{"backoff_base", rp.BackoffBase, DefaultBackoffBase, &p.BackoffBase},
			{"backoff_max", rp.BackoffMax, DefaultBackoffMax, &p.BackoffMax},
			{"max_retry_wait", rp.MaxRetryWait, DefaultMaxRetryWait, &p.MaxRetryWait},
			{"cooldown", rp.Cooldown, DefaultCooldown, &p.Cooldown},
			{"max_cooldown", rp.MaxCooldown, DefaultMaxCooldown, &p.MaxCooldown},
			{"trip_window", rp.TripWindow, DefaultTripWindow, &p.TripWindow},
			{"auth_cooldown", rp.AuthCooldown, DefaultAuthCooldown, &p.AuthCooldown},
		} {
			*d.out = d.raw.or(d.def)
			refused(at.child(d.key), d.raw.bad)
		}
		if pr := rp.Price; pr != nil {
			// A key left out is refused below, so its 0 never leaves Parse.
			p.Price = &Price{InputPerMTok: or(pr.InputPerMTok, 0), OutputPerMTok: or(pr.OutputPerMTok, 0)}
			if pr.InputPerMTok == nil {
				refused(at.child("price").child("input_per_mtok"), "required (0 for free)")
			}
			if pr.OutputPerMTok == nil {
				refused(at.child("price").child("output_per_mtok"), "required (0 for free)")
			}
		}
		if p.BaseURL == "" {
			switch p.Type {
			case TypeOpenAI:
				p.BaseURL = DefaultOpenAIBaseURL
			case TypeAnthropic:
				p.BaseURL = DefaultAnthropicBaseURL
			}
		}
		if p.APIKeyEnv != "" && validEnvName(p.APIKeyEnv) {
			v, _ := lookupEnv(p.APIKeyEnv)
			// Keys pasted with a stray newline or space would only fail later
			// as an invalid HTTP header.
			p.APIKey = strings.TrimSpace(v)
		}
		f.Providers = append(f.Providers, p)
	}
	return f
}
