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

// path is a place in the chain file: the keys and list indexes that lead
// to it from the top, such as providers, 1, timeout.
type path []string

func (p path) child(k string) path { return append(p[:len(p):len(p)], k) }

// id is the path as a map key.
func (p path) id() string { return fmt.Sprintf("%q", []string(p)) }

// problem is one thing wrong with a file, about the place at path. The
// problems of decoding have their line; the others get that of path.
type problem struct {
	path path
	text string
	line int
}

// entry is one place the file writes: a key of a mapping or an item of a
// list.
type entry struct {
	path  path
	key   string // empty for a list item
	line  int    // of the key or the item
	value *yaml.Node
	used  bool // a yaml error has been placed here
}

// report gathers the problems of a file and where its places are.
type report struct {
	entries  []entry
	at       map[string]int  // path id → its first entry
	problems []problem       // decoding's, with their line
	later    []problem       // build's, placed by path as validation's are
	refused  map[string]bool // places whose value yaml refused (see refuse)
	quiet    map[string]bool // places an unknown key probably meant, and so on (see covered)
	dropped  map[string]int  // list id → the first item yaml refused, and so left out
	unsure   map[string]bool // kinds of mapping with an unknown key and no suggestion
}

func newReport() *report {
	return &report{at: map[string]int{}, refused: map[string]bool{}, quiet: map[string]bool{}, dropped: map[string]int{}, unsure: map[string]bool{}}
}

func (r *report) add(p problem) { r.problems = append(r.problems, p) }

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

var chainKeys = keys(reflect.TypeFor[rawChain]())

// keys lists the keys a mapping decoded into t accepts.
func keys(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if tag := t.Field(i).Tag.Get("yaml"); tag != "" {
			out = append(out, tag)
		}
	}
	return out
}

// typeAt is the Go type yaml decodes the place at p into; nil for a place
// it does not decode, such as one under an unknown key.
func typeAt(p path) reflect.Type {
	t := reflect.TypeFor[rawFile]()
	for _, s := range p {
		_, err := strconv.Atoi(s)
		switch {
		case t == reflect.TypeFor[rawChain]() && err == nil:
			t = reflect.TypeFor[string]() // a provider of either form (see walk)
		case t.Kind() == reflect.Slice || t.Kind() == reflect.Map:
			t = t.Elem()
		case t.Kind() == reflect.Struct:
			i := slices.Index(keys(t), s)
			if i < 0 {
				return nil
			}
			t = t.Field(i).Type
		default:
			return nil
		}
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
	}
	return t
}

// shapes says what a value must be, by the Go type yaml could not decode
// it into.
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
	"map[string]config.rawChain": "must be a mapping of chain names to lists of providers, such as default: [primary, backup]",
	"config.names":               "must be a list of provider names, such as [primary, backup]",
	"config.chainList":           "must be a list of provider names, such as [primary, backup], or a mapping such as {providers: [primary, backup], cache_ttl: 10m}",
}

// walk records the places under n, the node at p. Aliases are not
// followed; merge keys are, after the keys written out, which win, as yaml
// merges them. merged holds the mappings merged into p so far, so that none
// is walked twice.
func (r *report) walk(n *yaml.Node, p path, merging bool, merged map[*yaml.Node]bool) {
	switch n.Kind {
	case yaml.SequenceNode:
		for i, item := range n.Content {
			ip := p.child(strconv.Itoa(i))
			r.record(entry{path: ip, line: item.Line, value: item})
			if t := typeAt(ip); t != nil && resolve(item).ShortTag() == "!!null" {
				// yaml leaves such an item out of the list, and says nothing.
				r.add(problem{path: ip, line: item.Line, text: shapes[t.String()] + " (got nothing)"})
				r.refuse(ip)
			}
			r.walk(item, ip, false, nil)
		}
	case yaml.MappingNode:
		if merged == nil {
			merged = map[*yaml.Node]bool{n: true}
		}
		var merges []*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			kp := p.child(k.Value)
			if isMerge(k) {
				merges = append(merges, v)
				continue
			}
			if k.Kind != yaml.ScalarNode {
				continue // yaml says so, with the line
			}
			if _, written := r.at[kp.id()]; written && merging {
				continue
			}
			r.record(entry{path: kp, key: k.Value, line: k.Line, value: v})
			if len(p) == 2 && p[0] == "chains" && k.Value == "providers" && v.Kind == yaml.SequenceNode {
				kp = p // the mapping form's providers have the list form's places
			}
			r.walk(v, kp, false, nil)
		}
		for _, m := range merges {
			list := []*yaml.Node{m}
			if m.Kind == yaml.SequenceNode {
				list = m.Content
			}
			for _, m := range list {
				if m = resolve(m); m.Kind == yaml.MappingNode && !merged[m] {
					merged[m] = true
					r.walk(m, p, true, merged)
				}
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

// find is the first place that matches and has no yaml error yet: yaml's
// errors give only a line, and it reports them in the order of the file,
// so a value merged into two providers gets an error for each.
func (r *report) find(match func(entry) bool) (path, bool) {
	for i := range r.entries {
		if e := &r.entries[i]; !e.used && match(*e) {
			e.used = true
			return e.path, true
		}
	}
	return nil, false
}

// refuse marks the place at p, whose value yaml refused and left out or at
// zero. Validation says nothing of it or of what it holds, nor of the
// mapping or list around it as a whole (a chain whose providers were
// refused lists none). A list goes on without the item, so validation
// would misnumber the items after it: it says nothing of them either.
func (r *report) refuse(p path) {
	r.refused[p.id()] = true
	if len(p) == 0 {
		return
	}
	list := p[:len(p)-1]
	r.quiet[list.id()] = true
	i, err := strconv.Atoi(p[len(p)-1])
	if j, ok := r.dropped[list.id()]; err == nil && r.entries[r.at[p.id()]].key == "" && (!ok || i < j) {
		r.dropped[list.id()] = i
	}
}

var (
	lineRE    = regexp.MustCompile(`(?s)^line (\d+): (.*)$`)
	unknownRE = regexp.MustCompile(`(?s)^field (.*) not found in type (\S+)$`)
	twiceRE   = regexp.MustCompile(`(?s)^mapping key (".*") already defined at line (\d+)$`)
	typeRE    = regexp.MustCompile("(?s)^cannot unmarshal (\\S+)(?: `(.*)`)? into (\\S+)$")
)

// yamlError turns one of yaml's errors into a problem of the file, such
// as `line 7: field temprature not found in type config.rawProvider` into
// `line 7: providers[0] "p": unknown key "temprature"; did you mean
// "temperature"?`, and marks the place yaml refused so that validation
// says no more about it.
func (r *report) yamlError(msg string) {
	m := lineRE.FindStringSubmatch(msg)
	if m == nil {
		r.add(problem{text: msg})
		return
	}
	line, _ := strconv.Atoi(m[1])
	// keyAt matches a key at the line, in a mapping yaml decodes into
	// the type called in (any when in is empty).
	keyAt := func(key, in string) func(entry) bool {
		return func(e entry) bool {
			if e.key != key || e.line != line || len(e.path) == 0 {
				return false
			}
			t := typeAt(e.path[:len(e.path)-1])
			return t != nil && (in == "" || t.String() == in)
		}
	}
	if u := unknownRE.FindStringSubmatch(m[2]); u != nil {
		text := fmt.Sprintf("unknown key %q", u[1])
		p, ok := r.find(keyAt(u[1], u[2]))
		if ok {
			p = p[:len(p)-1]
		}
		for _, mp := range mappings {
			if mp.typ.String() != u[2] {
				continue
			}
			if s, close := suggest.Closest(u[1], keys(mp.typ)); close {
				text += fmt.Sprintf("; did you mean %q?", s)
				if ok {
					r.quiet[p.child(s).id()] = true
				}
			} else {
				r.unsure[mp.kind] = true
			}
		}
		r.add(problem{path: p, line: line, text: text})
		return
	}
	if t := twiceRE.FindStringSubmatch(m[2]); t != nil {
		key, _ := strconv.Unquote(t[1])
		p, ok := r.find(keyAt(key, ""))
		if ok {
			// yaml decodes nothing of a mapping with a key given twice.
			p = p[:len(p)-1]
			r.refuse(p)
		}
		r.add(problem{path: p, line: line, text: fmt.Sprintf("key %q is given twice (first on line %s)", key, t[2])})
		return
	}
	if t := typeRE.FindStringSubmatch(m[2]); t != nil {
		tag, value, into := t[1], t[2], t[3]
		var got string
		p, ok := r.find(func(e entry) bool {
			v, t := resolve(e.value), typeAt(e.path)
			if t != nil && (t.String() == into || t == reflect.TypeFor[rawChain]() && into == "config.chainList") &&
				v.Line == line && v.ShortTag() == tag && (value == "" || yamlValue(v.Value) == value) {
				got = describe(v)
				return true
			}
			return false
		})
		switch {
		case ok:
			r.refuse(p)
		case tag == "!!seq":
			got = "a list"
		case tag == "!!map":
			got = "a mapping"
		default:
			got = strconv.Quote(value)
		}
		shape, known := shapes[into]
		if !known {
			shape = "cannot be read as " + into
		}
		r.add(problem{path: p, line: line, text: shape + " (got " + got + ")"})
		return
	}
	r.add(problem{line: line, text: m[2]})
}

// yamlValue is a value as yaml's errors quote it.
func yamlValue(v string) string {
	if len(v) > 10 {
		return v[:7] + "..."
	}
	return v
}

// lineOf is the line of the place at p or, when the file does not write it
// (a key left out), of the nearest value around it.
func (r *report) lineOf(p path) int {
	if i, ok := r.at[p.id()]; ok {
		return r.entries[i].line
	}
	for len(p) > 1 {
		p = p[:len(p)-1]
		if i, ok := r.at[p.id()]; ok {
			return r.entries[i].value.Line
		}
	}
	return 0
}

// covered says whether validation should keep quiet about p: yaml refused
// its value or one around it, or an unknown key probably meant it.
func (r *report) covered(p path) bool {
	if r.quiet[p.id()] {
		return true
	}
	for i := len(p); i >= 0; i-- {
		if r.refused[p[:i].id()] {
			return true
		}
		if j, ok := r.dropped[p[:i].id()]; ok && i < len(p) {
			if n, err := strconv.Atoi(p[i]); err == nil && n >= j {
				return true
			}
		}
	}
	return false
}

// fileError gathers every problem of the file, decoding's and those that
// validating f finds, each with its line, in the order of the file; nil
// when there is none.
func (r *report) fileError(f *File) *FileError {
	all := r.problems
	if f != nil {
		for _, p := range append(r.later, f.problems()...) {
			if !r.covered(p.path) {
				p.line = r.lineOf(p.path)
				all = append(all, p)
			}
		}
	}
	if len(all) == 0 {
		return nil
	}
	// Stable: problems on one line keep the order they were found in;
	// those without a line (something left out) go last.
	slices.SortStableFunc(all, func(a, b problem) int {
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
	var names []string // of the providers, but those yaml misnumbered
	for i := 0; f != nil && i < len(f.Providers); i++ {
		if r.covered(path{"providers", strconv.Itoa(i), "name"}) {
			break
		}
		names = append(names, f.Providers[i].Name)
	}
	e := &FileError{}
	for _, p := range all {
		e.Problems = append(e.Problems, Problem{Line: p.line, Text: join(where(p.path, names), p.text)})
	}
	// The keys of each mapping that had an unknown key without a
	// suggestion, once.
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
