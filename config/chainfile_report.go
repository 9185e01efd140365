package config

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/detourhq/detour/internal/suggest"
)

// This file turns yaml's errors into the chain file's problems, each with
// its line and its place in the file's terms, and finds the line of every
// place, so that the problems validation finds name their line too.

// shapes says what a value must be, by the type yaml could not decode it
// into.
var shapes = map[string]string{
	"config.rawFile":             "the chain file must be a mapping with the keys providers and chains",
	"[]config.rawProvider":       "must be a list of providers, each starting with - name:",
	"config.rawProvider":         "must be a mapping of keys such as name: and type:",
	"[]config.Rule":              "must be a list of rules, each - match: [...] and reply:",
	"config.Rule":                "must be a mapping with match: and reply:",
	"config.rawPrice":            "must be a mapping such as {input_per_mtok: 2.5, output_per_mtok: 10}",
	"float64":                    "must be a number such as 2.5",
	"[]string":                   "must be a list such as [a, b]",
	"string":                     "must be a single value",
	"config.ProviderType":        "must be a single value",
	"config.duration":            "must be a duration such as 500ms, 30s or 10m",
	"config.count":               "must be a whole number",
	"int64":                      "is too large", // count's refusal of a number that no int holds
	"map[string]config.rawChain": "must be a mapping of chain names to lists of providers, such as default: [primary, backup]",
	"config.names":               "must be a list of provider names, such as [primary, backup]",
	"config.rawChain":            "must be a list of provider names, such as [primary, backup], or a mapping such as {providers: [primary, backup], cache_ttl: 10m}",
}

// mappings are the chain file's mappings, by the kind the hints name.
var mappings = []struct {
	kind string
	typ  reflect.Type
}{
	{"the file", reflect.TypeFor[rawFile]()},
	{"a provider", reflect.TypeFor[rawProvider]()},
	{"a rule", reflect.TypeFor[Rule]()},
	{"a price", reflect.TypeFor[rawPrice]()},
	{"a chain", reflect.TypeFor[rawChain]()},
}

// keys lists the keys of a mapping decoded into t.
func keys(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if k := t.Field(i).Tag.Get("yaml"); k != "" {
			out = append(out, k)
		}
	}
	return out
}

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

// path is a place in the chain file: the keys and list indexes that lead
// to it, such as providers, 1, timeout.
type path []string

func (p path) child(k string) path { return append(p[:len(p):len(p)], k) }
func (p path) id() string          { return fmt.Sprintf("%q", []string(p)) }

// problem is one thing wrong with a file, about the place at path. Those
// yaml finds have their line; the others get that of path.
type problem struct {
	path path
	text string
	line int
}

// entry is one place the file writes: a key of a mapping or an item of a
// list, with the line of the key or the item.
type entry struct {
	path  path
	key   string // empty for a list item
	line  int
	value *yaml.Node
	isKey bool // value is a key that is not a single value; path is its mapping's
	used  bool // a yaml error is placed here
}

// report gathers the problems of a file and where its places are.
type report struct {
	entries  []entry
	at       map[string]int  // path id → its first entry
	problems []problem       // with their line
	later    []problem       // placed by path, as validation's are
	refused  map[string]bool // places whose value yaml refused (see refuse)
	quiet    map[string]bool // places, but not what they hold, validation says nothing of
	unsure   map[string]bool // kinds of mapping with an unknown key and no close known one
}

// fatal records an error that stopped yaml.
func (r *report) fatal(err error) {
	msg, line := strings.TrimPrefix(err.Error(), "yaml: "), 0
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	if msg == "document contains excessive aliasing" {
		msg = "too many aliases: they would expand the file many times over"
	} else {
		msg = "not valid YAML: " + msg
	}
	r.problems = append(r.problems, problem{line: line, text: msg})
}

// walk records the places under n, the node at p. Aliases are not
// followed, but merge keys are, after the keys written out, which win, as
// yaml merges them; merged holds the mappings merged into p so far.
func (r *report) walk(n *yaml.Node, p path, merged map[*yaml.Node]bool) {
	if n.Kind == yaml.SequenceNode {
		for i, item := range n.Content {
			ip := p.child(strconv.Itoa(i))
			r.record(entry{path: ip, line: item.Line, value: item})
			if resolve(item).ShortTag() == "!!null" {
				// yaml leaves such an item out, and says nothing.
				r.problems = append(r.problems, problem{path: ip, line: item.Line, text: "must not be empty"})
				r.refuse(ip)
			}
			r.walk(item, ip, nil)
		}
	}
	if n.Kind != yaml.MappingNode {
		return
	}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v, kp := n.Content[i], n.Content[i+1], p.child(n.Content[i].Value)
		_, written := r.at[kp.id()]
		switch {
		case k.ShortTag() == "!!merge":
			merges = append(merges, v)
			continue
		case k.Kind != yaml.ScalarNode:
			r.entries = append(r.entries, entry{path: p, line: k.Line, value: k, isKey: true})
			continue
		case resolve(k).ShortTag() == "!!null":
			// yaml leaves such a key out, even from a struct, and says nothing.
			r.problems = append(r.problems, problem{path: p, line: k.Line, text: "a key must be a plain word (got nothing)"})
			continue
		case written && merged != nil:
			continue // a merged key written out
		}
		r.record(entry{path: kp, key: k.Value, line: k.Line, value: v})
		if len(p) == 2 && p[0] == "chains" && k.Value == "providers" && v.Kind == yaml.SequenceNode {
			kp = p // the mapping form's providers have the places of the list form's
		}
		r.walk(v, kp, nil)
	}
	if merged == nil {
		merged = map[*yaml.Node]bool{n: true}
	}
	for _, m := range merges {
		list := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			list = m.Content
		}
		for _, m := range list {
			if m = resolve(m); m.Kind == yaml.MappingNode && !merged[m] {
				merged[m] = true
				r.walk(m, p, merged)
			}
		}
	}
}

func (r *report) record(e entry) {
	if _, ok := r.at[e.path.id()]; !ok {
		r.at[e.path.id()] = len(r.entries)
	}
	r.entries = append(r.entries, e)
}

func resolve(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		return n.Alias
	}
	return n
}

var (
	lineRE    = regexp.MustCompile(`(?s)^line (\d+): (.*)$`)
	unknownRE = regexp.MustCompile(`(?s)^field (.*) not found in type (\S+)$`)
	twiceRE   = regexp.MustCompile(`(?s)^mapping key (".*") already defined at line (\d+)$`)
	typeRE    = regexp.MustCompile("(?s)^cannot unmarshal (\\S+)(?: `(.*)`)? into (\\S+)$")
)

// yamlError turns one of yaml's errors into a problem of the file: it
// finds the place by the line, which is all yaml gives, and by what is
// there. Of the places that match, the deepest is taken, as the value the
// error is about (not the list around it on the same line), and the first
// in the file, as yaml reports in the file's order: a value merged into
// two providers gets an error for each.
func (r *report) yamlError(msg string) {
	m := lineRE.FindStringSubmatch(msg)
	if m == nil {
		r.problems = append(r.problems, problem{text: msg})
		return
	}
	line, _ := strconv.Atoi(m[1])
	place := func(match func(e entry, v *yaml.Node) bool) *entry {
		var best *entry
		for i, e := range r.entries {
			if !e.used && match(e, resolve(e.value)) && (best == nil || len(e.path) > len(best.path)) {
				best = &r.entries[i]
			}
		}
		if best != nil {
			best.used = true
		}
		return best
	}
	keyAt := func(key string) func(entry, *yaml.Node) bool {
		return func(e entry, _ *yaml.Node) bool { return e.key == key && e.line == line }
	}
	text := m[2]
	var p path
	if u := unknownRE.FindStringSubmatch(m[2]); u != nil {
		text = fmt.Sprintf("unknown key %q", u[1])
		if e := place(keyAt(u[1])); e != nil {
			p = e.path[:len(e.path)-1]
		}
		for _, mp := range mappings {
			if mp.typ.String() != u[2] {
				continue
			}
			s, ok := suggest.Closest(u[1], keys(mp.typ))
			if !ok {
				r.unsure[mp.kind] = true
				continue
			}
			text += fmt.Sprintf("; did you mean %q?", s)
			if p != nil {
				r.quiet[p.child(s).id()] = true // "model: required" is no news after "modle"
			}
		}
	} else if t := twiceRE.FindStringSubmatch(m[2]); t != nil {
		key, _ := strconv.Unquote(t[1])
		text = fmt.Sprintf("key %q is given twice (first on line %s)", key, t[2])
		if e := place(keyAt(key)); e != nil {
			p = e.path[:len(e.path)-1] // yaml reads nothing of the mapping
			r.refuse(p)
		}
	} else if t := typeRE.FindStringSubmatch(m[2]); t != nil {
		e := place(func(e entry, v *yaml.Node) bool {
			return v.Line == line && v.ShortTag() == t[1] && (t[2] == "" || yamlValue(v.Value) == t[2])
		})
		shape, got := shapes[t[3]], strconv.Quote(t[2])
		switch {
		case e != nil && e.isKey:
			p, shape, got = e.path, "a key must be a plain word", describe(e.value)
		case e != nil:
			p, got = e.path, describe(resolve(e.value))
			r.refuse(p)
		case t[1] == "!!seq":
			got = "a list"
		case t[1] == "!!map":
			got = "a mapping"
		}
		text = shape + " (got " + got + ")"
	}
	r.problems = append(r.problems, problem{path: p, line: line, text: text})
}

// refuse marks the place at p, whose value yaml refused and left out or at
// zero: validation says nothing of it, of what it holds, or of the mapping
// or list around it as a whole (a chain whose providers were refused lists
// none).
func (r *report) refuse(p path) {
	r.refused[p.id()] = true
	if len(p) > 0 {
		r.quiet[p[:len(p)-1].id()] = true
	}
}

// covered says whether validation should keep quiet about p: yaml refused
// its value or one around it, or an unknown key probably meant it.
func (r *report) covered(p path) bool {
	for i := len(p); i >= 0; i-- {
		if r.refused[p[:i].id()] {
			return true
		}
	}
	return r.quiet[p.id()]
}

// lineOf is the line of the place at p or, when the file does not write it
// (a key left out), of the nearest value around it.
func (r *report) lineOf(p path) int {
	if i, ok := r.at[p.id()]; ok {
		return r.entries[i].line
	}
	for len(p) > 1 { // the top's line is not that of a key it lacks
		p = p[:len(p)-1]
		if i, ok := r.at[p.id()]; ok {
			return r.entries[i].value.Line
		}
	}
	return 0
}

// fileError gathers every problem of the file, decoding's and those that
// validating f finds, each with its line, in the order of the file; nil
// when there is none.
func (r *report) fileError(f *File) *FileError {
	all := r.problems
	var names []string
	if f != nil {
		for _, p := range append(r.later, f.problems()...) {
			if !r.covered(p.path) {
				p.line = r.lineOf(p.path)
				all = append(all, p)
			}
		}
		for i, p := range f.Providers {
			if r.refused[path{"providers", strconv.Itoa(i)}.id()] {
				break // yaml left it out: the names after it are misnumbered
			}
			names = append(names, p.Name)
		}
	}
	if len(all) == 0 {
		return nil
	}
	// Stable: problems on one line keep the order they were found in;
	// those without a line (something left out) go last.
	slices.SortStableFunc(all, func(a, b problem) int {
		if a.line == 0 || b.line == 0 {
			return b.line - a.line // the one with a line first
		}
		return a.line - b.line
	})
	e := &FileError{}
	for _, p := range all {
		e.Problems = append(e.Problems, Problem{Line: p.line, Text: join(where(p.path, names), p.text)})
	}
	for _, mp := range mappings {
		if r.unsure[mp.kind] {
			e.Hints = append(e.Hints, fmt.Sprintf("keys of %s: %s", mp.kind, strings.Join(keys(mp.typ), ", ")))
		}
	}
	return e
}

// where names a place as problems do, such as `providers[1] "backup":
// rules[0]: match[2]` or `chains.default[1]`; names are the providers'.
func where(p path, names []string) string {
	var b strings.Builder
	for i, s := range p {
		n, err := strconv.Atoi(s)
		switch {
		case i == 1 && p[0] == "chains" && nameRE.MatchString(s):
			b.WriteString("." + s)
		case i == 1 && p[0] == "chains":
			fmt.Fprintf(&b, ".%q", s)
		case i > 0 && err == nil:
			fmt.Fprintf(&b, "[%d]", n)
			if i == 1 && p[0] == "providers" && n >= 0 && n < len(names) && names[n] != "" {
				fmt.Fprintf(&b, " %q", names[n])
			}
		default:
			if i > 0 {
				b.WriteString(": ")
			}
			b.WriteString(s)
		}
	}
	return b.String()
}

// join puts a place before a message: `providers[1] "backup": timeout: …`.
func join(where, msg string) string {
	if where == "" {
		return msg
	}
	return where + ": " + msg
}
