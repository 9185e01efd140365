package chain

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/detourhq/detour/internal/text"
)

// Schema is a compiled response_schema, which an answer's content must
// satisfy to win. It is safe for concurrent use.
type Schema struct {
	compiled *jsonschema.Schema
	patterns *matchBudget // nil without patterns: checks run concurrently
}

// schemaURL is the name the request's schema is compiled under, never fetched.
const schemaURL = "detour:response_schema"

// CompileSchema compiles a request's response_schema. A schema outside the
// limits of CheckSchema, or whose patterns exceed MaxSchemaPatternSize, is
// refused before it costs; one that could cost more than
// MaxSchemaEvaluations per answer is refused once compiled. References
// outside the schema are refused: no request reads files or fetches URLs.
func CompileSchema(doc map[string]any) (*Schema, error) {
	raw, err := schemaJSON(doc)
	if err != nil {
		return nil, err
	}
	return compileSchemaJSON(raw)
}

// schemaJSON checks doc against the limits and returns its canonical JSON
// (encoding/json sorts map keys).
func schemaJSON(doc map[string]any) ([]byte, error) {
	if err := CheckSchema(doc); err != nil {
		return nil, err
	}
	// So that values decoded from msgpack reach the compiler as JSON values.
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("response_schema is not JSON: %w", err)
	}
	if len(raw) > MaxSchemaBytes { // escapes can make it longer than CheckSchema counted
		return nil, fmt.Errorf("response_schema is larger than %d bytes as JSON", MaxSchemaBytes)
	}
	return raw, nil
}

// compileSchemaJSON compiles a schema that schemaJSON has checked.
func compileSchemaJSON(raw []byte) (*Schema, error) {
	parsed, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("response_schema is not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no scheme may be loaded
	match := &matchBudget{}
	patterns := &patternBudget{left: MaxSchemaPatternSize, seen: map[string]*boundedRegexp{}, match: match}
	defer patterns.closed.Store(true)
	c.UseRegexpEngine(patterns.compile)
	if err := c.AddResource(schemaURL, parsed); err != nil {
		return nil, compileError(err)
	}
	compiled, err := c.Compile(schemaURL)
	if err != nil {
		return nil, compileError(err)
	}
	if err := checkEvaluations(compiled); err != nil {
		return nil, err
	}
	if err := refCycle(compiled); err != nil {
		return nil, err
	}
	s := &Schema{compiled: compiled}
	if len(patterns.seen) > 0 {
		s.patterns = match
	}
	return s, nil
}

// maxSchemaErrorText is how much of the compiler's or validator's error
// text is kept, in bytes: it lists every failing location, and ends up in
// a log line and a header.
const maxSchemaErrorText = 512

// schemaError is err's text on one line after prefix, cut short.
func schemaError(prefix string, err error) error {
	return errors.New(prefix + ": " + text.Cut(oneLine(err.Error()), maxSchemaErrorText))
}

// SchemaCacheSize is how many compiled schemas a SchemaCache keeps: most take
// a few KB, the limits bound one at about 7 MB, so 16 are at most ~100 MB.
const SchemaCacheSize = 16

// maxSchemaCompilations bounds the compilations a SchemaCache runs at once,
// never more than GOMAXPROCS: more than there are CPUs finish none sooner
// and hold more memory. Only a flood of distinct schemas waits here, kept
// from every CPU of a large machine and to a few tens of MB per cache.
const maxSchemaCompilations = 4

// SchemaCache compiles response schemas and keeps the most recently used, keyed
// by a hash of their canonical JSON, so that a schema sent with every request
// is compiled once; one that does not compile is remembered too. It is safe for
// concurrent use; requests with one schema share one compilation.
type SchemaCache struct {
	mu        sync.Mutex
	size      int
	entries   map[[sha256.Size]byte]*list.Element // of *schemaEntry
	recent    *list.List                          // most recently used first
	compile   func(raw []byte) (*Schema, error)
	compilers chan struct{} // a token per compilation under way
}

// schemaEntry is one schema's compilation.
type schemaEntry struct {
	key     [sha256.Size]byte
	begun   bool          // guarded by the cache's mu
	started chan struct{} // closed once the compilation is under way
	done    chan struct{} // closed once schema and err are set
	schema  *Schema
	err     error
}

// NewSchemaCache returns a cache of up to size compiled schemas
// (SchemaCacheSize when size is not positive).
func NewSchemaCache(size int) *SchemaCache {
	if size <= 0 {
		size = SchemaCacheSize
	}
	return &SchemaCache{size: size, entries: map[[sha256.Size]byte]*list.Element{}, recent: list.New(), compile: compileSchemaJSON,
		compilers: make(chan struct{}, min(runtime.GOMAXPROCS(0), maxSchemaCompilations))}
}

// Compile returns doc compiled, from the cache when it can, after the
// limits of CheckSchema. The compiler cannot be interrupted, so it runs in
// a goroutine of its own and Compile returns ctx's error once ctx ends; the
// compilation finishes and is kept. Beyond maxSchemaCompilations a caller
// waits under ctx; a schema all its callers gave up on before its turn is
// not compiled until it is sent again.
func (c *SchemaCache) Compile(ctx context.Context, doc map[string]any) (*Schema, error) {
	raw, err := schemaJSON(doc)
	if err != nil {
		return nil, err
	}
	e := c.entry(raw)
	if err := c.start(ctx, e, raw); err != nil {
		return nil, err
	}
	select {
	case <-e.done:
		return e.schema, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// start returns once e's compilation is under way, started by this caller
// or another, or with ctx's error once ctx ends: only a caller that still
// wants the schema starts it.
func (c *SchemaCache) start(ctx context.Context, e *schemaEntry, raw []byte) error {
	select {
	case <-e.started: // done or under way: no compiler is taken
		return nil
	default:
	}
	select {
	case <-e.started:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case c.compilers <- struct{}{}:
	}
	c.mu.Lock()
	// select picks at random among ready cases: a caller whose ctx ended
	// as a compiler came free starts nothing.
	first := !e.begun && ctx.Err() == nil
	if first {
		e.begun = true
	}
	c.mu.Unlock()
	if !first {
		<-c.compilers
		return ctx.Err() // nil when another caller started it
	}
	close(e.started)
	// Ends when the compilation does, and gives its compiler back then; an
	// entry evicted meanwhile is still completed for those waiting on it.
	go func() {
		defer func() { <-c.compilers }()
		defer close(e.done)
		defer func() { // outside input must not crash the process through a compiler bug
			if r := recover(); r != nil {
				e.schema, e.err = nil, fmt.Errorf("response_schema: the compiler failed: %v", r)
			}
		}()
		e.schema, e.err = c.compile(raw)
	}()
	return nil
}

// entry returns raw's entry, adding one if need be and evicting the least
// recently used beyond the cache's size.
func (c *SchemaCache) entry(raw []byte) *schemaEntry {
	key := sha256.Sum256(raw)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.recent.MoveToFront(el)
		return el.Value.(*schemaEntry)
	}
	e := &schemaEntry{key: key, started: make(chan struct{}), done: make(chan struct{})}
	c.entries[key] = c.recent.PushFront(e)
	for c.recent.Len() > c.size {
		oldest := c.recent.Back()
		c.recent.Remove(oldest)
		delete(c.entries, oldest.Value.(*schemaEntry).key)
	}
	return e
}

// Validate checks that content is JSON satisfying the schema; a Markdown
// code fence around it, which models often add, is tolerated. An answer
// nested deeper than MaxAnswerDepth, or whose strings would cost more than
// MaxPatternWork to match, fails. Checks against one Schema with patterns
// run one at a time, so each has that budget to itself.
func (s *Schema) Validate(content string) error {
	content = stripFence(content)
	if jsonDeeperThan(content, MaxAnswerDepth) {
		// Before parsing: a recursive schema's cost grows with the depth.
		return fmt.Errorf("answer nests deeper than %d levels", MaxAnswerDepth)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(content))
	if err != nil {
		// The answer's start (prose, an apology) says more than the parser.
		return fmt.Errorf("answer is not JSON; it begins %s", quoteStart(strings.TrimSpace(content), 40))
	}
	if s.patterns != nil {
		s.patterns.mu.Lock()
		defer s.patterns.mu.Unlock()
		s.patterns.left, s.patterns.spent = MaxPatternWork, false
	}
	err = s.compiled.Validate(inst)
	if s.patterns != nil && s.patterns.spent {
		return fmt.Errorf("answer is too long to check against the patterns of response_schema (over %d instructions × bytes)", MaxPatternWork)
	}
	if err != nil {
		return validationError("answer does not satisfy response_schema", err)
	}
	return nil
}

func stripFence(s string) string {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "```") || !strings.HasSuffix(t, "```") || len(t) < 6 {
		return s
	}
	t = strings.TrimSuffix(strings.TrimPrefix(t, "```"), "```")
	if nl := strings.IndexByte(t, '\n'); nl >= 0 && !strings.ContainsAny(t[:nl], "{[\"") {
		t = t[nl+1:] // drop the language tag line
	}
	return t
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func quoteStart(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return strconv.Quote(string(r[:n]) + "…")
	}
	return strconv.Quote(s)
}
