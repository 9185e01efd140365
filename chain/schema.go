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

// Schema is a compiled response_schema: a JSON Schema the answer's content
// must satisfy before the answer may win. It is safe for concurrent use.
type Schema struct {
	compiled *jsonschema.Schema
	// patterns is nil for a schema without patterns: its checks need no
	// budget, so they run concurrently.
	patterns *matchBudget
}

// schemaURL is the name the request's schema is compiled under; it is never
// fetched.
const schemaURL = "detour:response_schema"

// CompileSchema compiles a request's response_schema. A schema outside the
// limits of CheckSchema, or whose patterns exceed MaxSchemaPatternSize, is
// refused before it costs; one that could cost more than
// MaxSchemaEvaluations to check an answer against is refused once compiled. References outside the schema itself are refused:
// a request must not make the processor read files or fetch URLs.
func CompileSchema(doc map[string]any) (*Schema, error) {
	raw, err := schemaJSON(doc)
	if err != nil {
		return nil, err
	}
	return compileSchemaJSON(raw)
}

// schemaJSON checks doc against the limits and returns its JSON encoding,
// which is canonical: encoding/json sorts map keys.
func schemaJSON(doc map[string]any) ([]byte, error) {
	if err := CheckSchema(doc); err != nil {
		return nil, err
	}
	// Round-trip through JSON so values decoded from msgpack (int64, []byte
	// keys...) reach the compiler as JSON values.
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
	patterns := newPatternBudget(match)
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

// maxSchemaErrorText is how much of the compiler's or validator's error text
// is kept, in bytes. It lists every failing location; for an outside schema
// that can be thousands, and the text ends up in a log line and a header.
const maxSchemaErrorText = 512

// schemaError is err's text on one line after prefix, cut to
// maxSchemaErrorText.
func schemaError(prefix string, err error) error {
	return errors.New(prefix + ": " + text.Cut(oneLine(err.Error()), maxSchemaErrorText))
}

// SchemaCacheSize is how many compiled schemas a SchemaCache keeps. Clients
// tend to send one schema with many requests. Most compiled schemas take a
// few KB; the limits bound one at about 7 MB (5,000 objects keep 4 MB, a
// full pattern budget 2 MB), so 16 keeps a cache filled on purpose with the
// largest near 100 MB.
const SchemaCacheSize = 16

// maxSchemaCompilations bounds the compilations a SchemaCache runs at once,
// which is also never more than GOMAXPROCS: a compilation is CPU work that
// cannot be interrupted, so more at once than there are CPUs finishes none
// sooner and holds more memory (a compiled schema up to about 7 MB, see
// SchemaCacheSize). Clients tend to send few distinct schemas, each compiled
// once, so only a flood of distinct schemas waits here; 4 keeps its
// compilations from taking every CPU of a large machine, and what they hold
// to a few tens of MB, per cache.
const maxSchemaCompilations = 4

// SchemaCache compiles response schemas and keeps the most recently used,
// keyed by a hash of their canonical JSON, so that a schema sent with every
// request is compiled once. A schema that does not compile is remembered too,
// so resending it costs no more. It is safe for concurrent use; requests with
// the same schema share one compilation.
type SchemaCache struct {
	mu      sync.Mutex
	size    int
	entries map[[sha256.Size]byte]*list.Element // of *schemaEntry
	recent  *list.List                          // most recently used first
	compile func(raw []byte) (*Schema, error)
	// compilers holds a token for each compilation under way, evicted
	// entries' included.
	compilers chan struct{}
}

// schemaEntry is one schema's compilation: waiting for a compiler, under
// way, or done.
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

// Compile returns doc compiled, from the cache when it can. The limits of
// CheckSchema are checked first. The compiler cannot be interrupted, so it
// runs in a goroutine of its own and Compile returns ctx's error as soon as
// ctx ends; the compilation still finishes (its cost is bounded by the limits)
// and is kept for the next request with this schema. A cache runs at most
// GOMAXPROCS compilations at once, and at most 4; beyond them a caller waits,
// under ctx, for one to end. A schema whose callers all gave up before then
// is not compiled until it is sent again.
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

// start returns once e's compilation is under way, waiting for a compiler to
// start it unless another caller does first, or with ctx's error once ctx
// ends: only a caller that still wants the schema starts its compilation.
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
	// A caller whose ctx ended as a compiler came free starts nothing:
	// select picks at random among the cases ready.
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
		defer func() {
			// Outside input must not crash the process, even through
			// a bug of the compiler.
			if r := recover(); r != nil {
				e.schema, e.err = nil, fmt.Errorf("response_schema: the compiler failed: %v", r)
			}
		}()
		e.schema, e.err = c.compile(raw)
	}()
	return nil
}

// held returns how many schemas the cache holds, compiled, under way or
// waiting for a compiler.
func (c *SchemaCache) held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.recent.Len()
}

// entry returns the cache entry of raw, adding one if it has none, and evicts
// the least recently used beyond the cache's size.
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

// Validate checks that content is JSON satisfying the schema. A Markdown code
// fence around the JSON, which models often add, is tolerated. An answer
// nested deeper than MaxAnswerDepth, or whose strings would cost more than
// MaxPatternWork to match, fails. Checks against one Schema with patterns run
// one at a time, so each has that budget to itself; a cached Schema is shared
// by every request that sends it, and most have no patterns.
func (s *Schema) Validate(content string) error {
	content = stripFence(content)
	if jsonDeeperThan(content, MaxAnswerDepth) {
		// Checked before parsing: a recursive schema's cost grows with
		// the answer's depth (see MaxSchemaEvaluations).
		return fmt.Errorf("answer nests deeper than %d levels", MaxAnswerDepth)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(content))
	if err != nil {
		// The parser's words ("invalid character 'k' in literal false")
		// say less than the answer's start: prose, an apology, a preamble.
		return fmt.Errorf("answer is not JSON; it begins %s", quoteStart(strings.TrimSpace(content), 40))
	}
	if s.patterns == nil {
		if err := s.compiled.Validate(inst); err != nil {
			return validationError("answer does not satisfy response_schema", err)
		}
		return nil
	}
	s.patterns.mu.Lock()
	defer s.patterns.mu.Unlock()
	s.patterns.left, s.patterns.spent = MaxPatternWork, false
	err = s.compiled.Validate(inst)
	if s.patterns.spent {
		return fmt.Errorf("answer is too long to check against the patterns of response_schema (over %d instructions × bytes)", MaxPatternWork)
	}
	if err != nil {
		return validationError("answer does not satisfy response_schema", err)
	}
	return nil
}

// stripFence removes a surrounding ```json … ``` fence.
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

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// quoteStart quotes the first n characters of s, marking a cut with "…".
func quoteStart(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return strconv.Quote(string(r[:n]) + "…")
	}
	return strconv.Quote(s)
}
