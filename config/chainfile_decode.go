package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/detourhq/detour/internal/suggest"
)

// rawFile is the chain file as written. Tunables are pointers so that a key
// left out takes its default while an explicit 0 (failure_threshold: 0
// disables cooldowns, max_retries: 0 means one attempt) is kept.
type rawFile struct {
	Providers []rawProvider
	Chains    map[string][]string
	// Caches holds the cache keys of chains written as a mapping.
	Caches map[string]rawCache
}

// rawCache is the cache settings of one chain as written.
type rawCache struct {
	TTL      *time.Duration
	StaleTTL *time.Duration
}

type rawProvider struct {
	Name             string
	Type             ProviderType
	BaseURL          string
	Model            string
	APIKeyEnv        string
	Timeout          *time.Duration
	MaxRetries       *int
	BackoffBase      *time.Duration
	BackoffMax       *time.Duration
	MaxRetryWait     *time.Duration
	FailureThreshold *int
	Cooldown         *time.Duration
	MaxCooldown      *time.Duration
	TripWindow       *time.Duration
	AuthCooldown     *time.Duration
	Rules            []Rule
	DefaultReply     string
	Price            *Price
}

// The keys each mapping of the chain file accepts, in the order of
// docs/settings.md; unknown keys are refused, with the nearest known one
// suggested.
var (
	fileKeys     = []string{"providers", "chains"}
	providerKeys = []string{"name", "type", "base_url", "model", "api_key_env", "timeout", "max_retries", "backoff_base",
		"backoff_max", "max_retry_wait", "failure_threshold", "cooldown", "max_cooldown", "trip_window", "auth_cooldown",
		"rules", "default_reply", "price"}
	ruleKeys  = []string{"match", "reply"}
	priceKeys = []string{"input_per_mtok", "output_per_mtok"}
	chainKeys = []string{"providers", "cache_ttl", "stale_ttl"}
)

// aliasBudget bounds the values aliases may add to what the decoder visits
// beyond the file's own nodes, so that aliases of aliases (a "billion
// laughs" file) cannot make it work forever, whatever the file's size.
const aliasBudget = 100_000

// decoder walks the YAML node tree of a chain file by hand rather than
// through yaml's struct decoding, so that it can report every problem at
// once, each with its line and in the file's terms, suggest the key an
// unknown one probably meant, and record the line of every place so that
// the problems validation finds later can name their line too.
//
// A place is a path such as "providers/1/timeout" or "chains/default/2".
type decoder struct {
	lines    map[string]int  // path → line of its key or list item
	problems []pathProblem   // in the order found
	refused  map[string]bool // paths whose value was refused: validation says no more there
	meant    map[string]bool // paths of keys that an unknown key probably meant
	unsure   map[string]bool // mappings ("provider") with an unknown key and no suggestion
	// budget is what aliases may still add; once it is spent, the one
	// problem reported is that, and what was left unread is not reported
	// as missing.
	budget int
}

// pathProblem is a problem and the place it is about.
type pathProblem struct {
	path string
	text string
	line int // set for problems the decoder finds; validation's get theirs from path
}

// pair is one key of a mapping, merge keys (<<) resolved.
type pair struct {
	key  string
	k, v *yaml.Node
}

// decode parses a chain file. The file is nil when the YAML could not be
// parsed at all; otherwise it holds what could be read, and the decoder the
// problems found.
func decode(data []byte) (*rawFile, *decoder) {
	d := &decoder{lines: map[string]int{}, refused: map[string]bool{}, meant: map[string]bool{}, unsure: map[string]bool{}, budget: aliasBudget}
	if line, what, ok := notText(data); ok {
		// The YAML parser says so without a place.
		d.add(line, "", "not valid YAML: "+what)
		return nil, d
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		d.syntax(err)
		return nil, d
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		d.syntax(err)
	default:
		d.add(extra.Line, "", "only one YAML document is allowed (remove the second ---)")
	}
	raw := &rawFile{Chains: map[string][]string{}, Caches: map[string]rawCache{}}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		d.budget += nodes(doc.Content[0])
		d.file(doc.Content[0], raw)
	}
	return raw, d
}

var (
	yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
	digitsRE   = regexp.MustCompile(`^[-+]?[0-9_]+$`)
	decimalRE  = regexp.MustCompile(`^[-+]?[0-9]+$`)
)

// syntax records an error of the YAML parser: the file is not YAML.
func (d *decoder) syntax(err error) {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		d.add(line, "", "not valid YAML: "+m[2])
		return
	}
	d.add(0, "", "not valid YAML: "+strings.TrimPrefix(msg, "yaml: "))
}

func (d *decoder) add(line int, path, text string) {
	if d.budget <= 0 {
		return // the aliases were too many: that is the file's problem
	}
	d.problems = append(d.problems, pathProblem{path: path, text: text, line: line})
}

// refuse records a value that cannot be used: the place keeps its default.
func (d *decoder) refuse(n *yaml.Node, path, where, format string, args ...any) {
	d.refused[path] = true
	d.add(n.Line, path, join(where, fmt.Sprintf(format, args...)))
}

// join puts a place before a message: `providers[1] "backup": timeout: …`.
func join(where, msg string) string {
	if where == "" {
		return msg
	}
	return where + ": " + msg
}

// resolve follows an alias to its anchored node; nil once the budget is spent.
func (d *decoder) resolve(n *yaml.Node) *yaml.Node {
	if d.budget <= 0 {
		return nil
	}
	if d.budget == 1 {
		d.problems = []pathProblem{{line: n.Line, text: "too many aliases: they add more than 100000 values to the file"}}
		d.budget = 0
		return nil
	}
	d.budget--
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		return n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" }

// describe names what a node holds, for "(got …)".
func describe(n *yaml.Node) string {
	switch {
	case n.Kind == yaml.MappingNode:
		return "a mapping"
	case n.Kind == yaml.SequenceNode:
		return "a list"
	case isNull(n):
		return "nothing"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	return strconv.Quote(v)
}

// pairs lists the keys of a mapping, keys merged in with << included
// (a key written out wins over a merged one), and reports a key given twice.
func (d *decoder) pairs(n *yaml.Node, where string) []pair {
	var out []pair
	seen := map[string]int{}
	var merged []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			merged = append(merged, d.merge(v, where, map[*yaml.Node]bool{n: true})...)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			d.add(k.Line, "", join(where, fmt.Sprintf("a key must be a plain word (got %s)", describe(k))))
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.add(k.Line, "", join(where, fmt.Sprintf("key %q is given twice (first on line %d)", k.Value, first)))
			continue
		}
		seen[k.Value] = k.Line
		out = append(out, pair{key: k.Value, k: k, v: v})
	}
	for _, p := range merged {
		if _, ok := seen[p.key]; !ok {
			seen[p.key] = p.k.Line
			out = append(out, p)
		}
	}
	return out
}

// merge returns the pairs a merge key (<<: *anchor or <<: [*a, *b]) brings.
func (d *decoder) merge(v *yaml.Node, where string, visiting map[*yaml.Node]bool) []pair {
	v = d.resolve(v)
	if v == nil {
		return nil
	}
	var maps []*yaml.Node
	switch v.Kind {
	case yaml.MappingNode:
		maps = []*yaml.Node{v}
	case yaml.SequenceNode:
		for _, item := range v.Content {
			if item = d.resolve(item); item != nil {
				maps = append(maps, item)
			}
		}
	}
	var out []pair
	for _, m := range maps {
		if m.Kind != yaml.MappingNode {
			d.add(m.Line, "", join(where, fmt.Sprintf("<< must merge a mapping (got %s)", describe(m))))
			continue
		}
		if visiting[m] {
			d.add(m.Line, "", join(where, "<< merges a mapping into itself"))
			continue
		}
		visiting[m] = true
		out = append(out, d.pairs(m, where)...)
		delete(visiting, m)
	}
	return out
}

// unknown reports a key the mapping does not accept.
func (d *decoder) unknown(p pair, path, where, kind string, known []string) {
	text := fmt.Sprintf("unknown key %q", p.key)
	if s, ok := suggest.Closest(p.key, known); ok {
		text += fmt.Sprintf("; did you mean %q?", s)
		d.meant[child(path, s)] = true
	} else {
		d.unsure[kind] = true
	}
	d.add(p.k.Line, "", join(where, text))
}

// hints lists, once each, the keys of the mappings that had an unknown key
// without a suggestion.
func (d *decoder) hints() []string {
	var out []string
	for _, h := range []struct {
		kind string
		keys []string
	}{{"the file", fileKeys}, {"a provider", providerKeys}, {"a rule", ruleKeys}, {"a price", priceKeys}, {"a chain", chainKeys}} {
		if d.unsure[h.kind] {
			out = append(out, fmt.Sprintf("keys of %s: %s", h.kind, strings.Join(h.keys, ", ")))
		}
	}
	return out
}

func child(path string, key any) string {
	if path == "" {
		return fmt.Sprint(key)
	}
	return fmt.Sprintf("%s/%v", path, key)
}

// lineOf is the line of path or, when the file does not hold it (a key left
// out), of the nearest place that holds it.
func (d *decoder) lineOf(path string) int {
	for {
		if l, ok := d.lines[path]; ok {
			return l
		}
		i := strings.LastIndexByte(path, '/')
		if i < 0 {
			return 0
		}
		path = path[:i]
	}
}

// covered says whether validation should keep quiet about path: its value,
// or one around it, was refused, or an unknown key probably meant it.
func (d *decoder) covered(path string) bool {
	if d.meant[path] {
		return true
	}
	for {
		if d.refused[path] {
			return true
		}
		if path == "" {
			return false
		}
		i := strings.LastIndexByte(path, '/')
		path = path[:max(i, 0)]
	}
}

func (d *decoder) file(n *yaml.Node, raw *rawFile) {
	if n = d.resolve(n); n == nil || isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.refuse(n, "", "", "the chain file must be a mapping with the keys providers and chains (got %s)", describe(n))
		return
	}
	for _, p := range d.pairs(n, "") {
		d.lines[p.key] = p.k.Line
		switch p.key {
		case "providers":
			d.providers(p.v, raw)
		case "chains":
			d.chains(p.v, raw)
		default:
			d.unknown(p, "", "", "the file", fileKeys)
		}
	}
}

func (d *decoder) providers(n *yaml.Node, raw *rawFile) {
	if n = d.resolve(n); n == nil || isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.refuse(n, "providers", "providers", "must be a list of providers, each starting with - name: (got %s)", describe(n))
		return
	}
	for i, item := range n.Content {
		raw.Providers = append(raw.Providers, d.provider(item, i))
	}
}

func (d *decoder) provider(n *yaml.Node, i int) rawProvider {
	var rp rawProvider
	path := child("providers", i)
	where := fmt.Sprintf("providers[%d]", i)
	d.lines[path] = n.Line
	if n = d.resolve(n); n == nil {
		return rp
	}
	if n.Kind != yaml.MappingNode {
		d.refuse(n, path, where, "must be a mapping of keys such as name: and type: (got %s)", describe(n))
		return rp
	}
	pairs := d.pairs(n, where)
	// The name first, so that every problem can say which provider it is
	// about, as validation does.
	for _, p := range pairs {
		if v := p.v; p.key == "name" && v.Kind == yaml.ScalarNode && !isNull(v) && v.Value != "" {
			where += fmt.Sprintf(" %q", v.Value)
		}
	}
	for _, p := range pairs {
		kp := child(path, p.key)
		d.lines[kp] = p.k.Line
		switch p.key {
		case "name":
			rp.Name = d.str(p, kp, where)
		case "type":
			rp.Type = ProviderType(d.str(p, kp, where))
		case "base_url":
			rp.BaseURL = d.str(p, kp, where)
		case "model":
			rp.Model = d.str(p, kp, where)
		case "api_key_env":
			rp.APIKeyEnv = d.str(p, kp, where)
		case "default_reply":
			rp.DefaultReply = d.str(p, kp, where)
		case "timeout":
			rp.Timeout = d.duration(p, kp, where)
		case "backoff_base":
			rp.BackoffBase = d.duration(p, kp, where)
		case "backoff_max":
			rp.BackoffMax = d.duration(p, kp, where)
		case "max_retry_wait":
			rp.MaxRetryWait = d.duration(p, kp, where)
		case "cooldown":
			rp.Cooldown = d.duration(p, kp, where)
		case "max_cooldown":
			rp.MaxCooldown = d.duration(p, kp, where)
		case "trip_window":
			rp.TripWindow = d.duration(p, kp, where)
		case "auth_cooldown":
			rp.AuthCooldown = d.duration(p, kp, where)
		case "max_retries":
			rp.MaxRetries = d.count(p, kp, where)
		case "failure_threshold":
			rp.FailureThreshold = d.count(p, kp, where)
		case "rules":
			rp.Rules = d.rules(p, kp, where)
		case "price":
			rp.Price = d.price(p, kp, where)
		default:
			d.unknown(p, path, where, "a provider", providerKeys)
		}
	}
	return rp
}

// str reads a key that holds one value; any scalar is taken as text, as
// yaml itself would (model: 4 is the model "4").
func (d *decoder) str(p pair, path, where string) string {
	v := d.resolve(p.v)
	switch {
	case v == nil || isNull(v):
		return ""
	case v.Kind != yaml.ScalarNode:
		d.refuse(v, path, where, "%s: must be a single value (got %s)", p.key, describe(v))
		return ""
	}
	return v.Value
}

// duration reads a Go duration string ("500ms", "30s", "10m") or a bare 0.
// A key given no value (timeout: ~) takes its default.
func (d *decoder) duration(p pair, path, where string) *time.Duration {
	v := d.resolve(p.v)
	if v == nil || isNull(v) {
		return nil
	}
	if v.Kind == yaml.ScalarNode && (v.ShortTag() == "!!str" || v.ShortTag() == "!!int") {
		if dur, err := time.ParseDuration(v.Value); err == nil {
			return &dur
		}
	}
	d.refuse(v, path, where, "%s: must be a duration such as 500ms, 30s or 10m (got %s)", p.key, describe(v))
	return nil
}

// count reads a whole number; yaml would otherwise truncate 1.5 to 1.
func (d *decoder) count(p pair, path, where string) *int {
	v := d.resolve(p.v)
	if v == nil || isNull(v) {
		return nil
	}
	if v.Kind == yaml.ScalarNode && (v.ShortTag() == "!!int" || v.ShortTag() == "!!float") && decimalRE.MatchString(v.Value) {
		// yaml.v3 reads a leading 0 as octal, as YAML 1.1 did (and 08 as
		// a float): 010 is ten in YAML 1.2, as in the settings.
		n, err := strconv.ParseInt(v.Value, 10, strconv.IntSize)
		if err != nil {
			d.refuse(v, path, where, "%s: is too large (got %s)", p.key, describe(v))
			return nil
		}
		c := int(n)
		return &c
	}
	if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!float" && digitsRE.MatchString(v.Value) {
		// yaml takes an integer too large for 64 bits for a float.
		d.refuse(v, path, where, "%s: is too large (got %s)", p.key, describe(v))
		return nil
	}
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" {
		d.refuse(v, path, where, "%s: must be a whole number (got %s)", p.key, describe(v))
		return nil
	}
	if strings.Contains(v.Value, "_") { // YAML 1.1's digit separator, not YAML 1.2's
		d.refuse(v, path, where, "%s: must be a whole number (got %s)", p.key, describe(v))
		return nil
	}
	var c int
	if err := v.Decode(&c); err != nil {
		d.refuse(v, path, where, "%s: is too large (got %s)", p.key, describe(v))
		return nil
	}
	return &c
}

func (d *decoder) rules(p pair, path, where string) []Rule {
	v := d.resolve(p.v)
	if v == nil || isNull(v) {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		d.refuse(v, path, where, "rules: must be a list of rules, each - match: [...] and reply: (got %s)", describe(v))
		return nil
	}
	rules := make([]Rule, 0, len(v.Content))
	for j, item := range v.Content {
		rp := child(path, j)
		rw := join(where, fmt.Sprintf("rules[%d]", j))
		d.lines[rp] = item.Line
		var r Rule
		if item = d.resolve(item); item == nil {
			break
		}
		if item.Kind != yaml.MappingNode {
			d.refuse(item, rp, rw, "must be a mapping with match: and reply: (got %s)", describe(item))
			rules = append(rules, r)
			continue
		}
		for _, q := range d.pairs(item, rw) {
			kp := child(rp, q.key)
			d.lines[kp] = q.k.Line
			switch q.key {
			case "match":
				r.Match = d.list(q, kp, rw)
			case "reply":
				r.Reply = d.str(q, kp, rw)
			default:
				d.unknown(q, rp, rw, "a rule", ruleKeys)
			}
		}
		rules = append(rules, r)
	}
	return rules
}

// list reads a list of single values; a lone value is not taken for a
// list of one, so that the file says what it means.
func (d *decoder) list(p pair, path, where string) []string {
	v := d.resolve(p.v)
	if v == nil || isNull(v) {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		d.refuse(v, path, where, "%s: must be a list such as [a, b] (got %s)", p.key, describe(v))
		return nil
	}
	out := make([]string, 0, len(v.Content))
	for j, item := range v.Content {
		ip := child(path, j)
		d.lines[ip] = item.Line
		if item = d.resolve(item); item == nil {
			break
		}
		switch {
		case isNull(item):
			out = append(out, "")
		case item.Kind != yaml.ScalarNode:
			d.refuse(item, ip, where, "%s[%d]: must be a single value (got %s)", p.key, j, describe(item))
			out = append(out, "")
		default:
			out = append(out, item.Value)
		}
	}
	return out
}

func (d *decoder) chains(n *yaml.Node, raw *rawFile) {
	if n = d.resolve(n); n == nil || isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.refuse(n, "chains", "chains", "must be a mapping of chain names to lists of providers, such as default: [primary, backup] (got %s)", describe(n))
		return
	}
	for _, p := range d.pairs(n, "chains") {
		path := child("chains", p.key)
		where := "chains." + p.key
		if !nameRE.MatchString(p.key) {
			where = fmt.Sprintf("chains.%q", p.key)
		}
		d.lines[path] = p.k.Line
		v := d.resolve(p.v)
		switch {
		case v == nil:
			return
		case isNull(v):
			raw.Chains[p.key] = nil
		case v.Kind == yaml.MappingNode:
			raw.Chains[p.key] = nil
			d.chainMapping(v, path, where, p.key, raw)
		case v.Kind != yaml.SequenceNode:
			d.refuse(v, path, where, "must be a list of provider names, such as [primary, backup], or a mapping such as {providers: [primary, backup], cache_ttl: 10m} (got %s)", describe(v))
			raw.Chains[p.key] = nil
		default:
			raw.Chains[p.key] = d.chainList(v, path, where)
		}
	}
}

// chainMapping reads a chain written as a mapping: its providers and its
// response cache. Its providers' places are those of the list form
// (chains/<name>/<i>), so that validation names their lines alike.
func (d *decoder) chainMapping(v *yaml.Node, path, where, name string, raw *rawFile) {
	var c rawCache
	for _, q := range d.pairs(v, where) {
		kp := child(path, q.key)
		d.lines[kp] = q.k.Line
		switch q.key {
		case "providers":
			list := d.resolve(q.v)
			switch {
			case list == nil || isNull(list):
			case list.Kind != yaml.SequenceNode:
				d.refuse(list, path, where, "providers: must be a list of provider names, such as [primary, backup] (got %s)", describe(list))
			default:
				raw.Chains[name] = d.chainList(list, path, where)
			}
		case "cache_ttl":
			c.TTL = d.duration(q, kp, where)
		case "stale_ttl":
			c.StaleTTL = d.duration(q, kp, where)
		default:
			d.unknown(q, path, where, "a chain", chainKeys)
		}
	}
	raw.Caches[name] = c
}

// chainList reads a chain's list of provider names.
func (d *decoder) chainList(v *yaml.Node, path, where string) []string {
	names := make([]string, 0, len(v.Content))
	for j, item := range v.Content {
		ip := child(path, j)
		d.lines[ip] = item.Line
		if item = d.resolve(item); item == nil {
			return names
		}
		if item.Kind != yaml.ScalarNode {
			d.refuse(item, ip, fmt.Sprintf("%s[%d]", where, j), "must be a provider name (got %s)", describe(item))
		}
		names = append(names, item.Value)
	}
	return names
}

// build applies defaults and resolves API keys; it does not validate.
func (r *rawFile) build(lookupEnv func(string) (string, bool)) *File {
	f := &File{Providers: make([]Provider, 0, len(r.Providers)), Chains: r.Chains, Caches: map[string]ChainCache{}}
	if f.Chains == nil {
		f.Chains = map[string][]string{}
	}
	for name, rc := range r.Caches {
		c := ChainCache{TTL: or(rc.TTL, 0)}
		c.StaleTTL = or(rc.StaleTTL, 0)
		if rc.StaleTTL == nil && c.TTL > 0 {
			c.StaleTTL = DefaultStaleTTL
		}
		f.Caches[name] = c
	}
	for _, rp := range r.Providers {
		f.Providers = append(f.Providers, rp.build(lookupEnv))
	}
	return f
}

func (rp *rawProvider) build(lookupEnv func(string) (string, bool)) Provider {
	p := Provider{
		Name:             rp.Name,
		Type:             rp.Type,
		BaseURL:          strings.TrimRight(rp.BaseURL, "/"),
		Model:            rp.Model,
		APIKeyEnv:        rp.APIKeyEnv,
		Timeout:          or(rp.Timeout, DefaultTimeout),
		MaxRetries:       or(rp.MaxRetries, DefaultMaxRetries),
		BackoffBase:      or(rp.BackoffBase, DefaultBackoffBase),
		BackoffMax:       or(rp.BackoffMax, DefaultBackoffMax),
		MaxRetryWait:     or(rp.MaxRetryWait, DefaultMaxRetryWait),
		FailureThreshold: or(rp.FailureThreshold, DefaultFailureThreshold),
		Cooldown:         or(rp.Cooldown, DefaultCooldown),
		MaxCooldown:      or(rp.MaxCooldown, DefaultMaxCooldown),
		TripWindow:       or(rp.TripWindow, DefaultTripWindow),
		AuthCooldown:     or(rp.AuthCooldown, DefaultAuthCooldown),
		Rules:            rp.Rules,
		DefaultReply:     rp.DefaultReply,
		Price:            rp.Price,
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
	return p
}

func or[T any](v *T, def T) T {
	if v == nil {
		return def
	}
	return *v
}

// fileError gathers every problem of the file, decoding's and those that
// validating f finds, each with its line, in the order of the file; nil
// when there is none.
func (d *decoder) fileError(f *File) *FileError {
	all := d.problems
	if d.budget <= 0 {
		f = nil // only the aliases' problem stands
	}
	if f != nil {
		for _, p := range f.problems() {
			if !d.covered(p.path) {
				all = append(all, pathProblem{path: p.path, text: p.text, line: d.lineOf(p.path)})
			}
		}
	}
	if len(all) == 0 {
		return nil
	}
	// Stable: problems on one line keep the order they were found in;
	// those without a line (something left out) go last.
	slices.SortStableFunc(all, func(a, b pathProblem) int {
		switch {
		case a.line == b.line:
			return 0
		case a.line == 0:
			return 1
		case b.line == 0:
			return -1
		}
		return a.line - b.line
	})
	e := &FileError{Hints: d.hints()}
	for _, p := range all {
		e.Problems = append(e.Problems, Problem{Line: p.line, Text: p.text})
	}
	return e
}
