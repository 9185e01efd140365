package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// nested returns depth levels of {"items": …} around an empty schema.
func nested(depth int) map[string]any {
	s := map[string]any{}
	for range depth - 1 {
		s = map[string]any{"items": s}
	}
	return s
}

// objects is n empty objects.
func objects(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{}
	}
	return out
}

// wideSchema is an object schema with n string properties.
func wideSchema(n int) map[string]any {
	props := map[string]any{}
	for i := range n {
		props[fmt.Sprintf("p%d", i)] = map[string]any{"type": "string"}
	}
	return map[string]any{"type": "object", "properties": props}
}

func TestCheckSchemaLimits(t *testing.T) {
	deepArray := []any{}
	for range MaxSchemaDepth - 2 {
		deepArray = []any{deepArray}
	}
	tests := []struct {
		name string
		doc  map[string]any
		ok   bool
	}{
		{"as deep as allowed", nested(MaxSchemaDepth), true},
		{"one level too deep", nested(MaxSchemaDepth + 1), false},
		{"arrays as deep as allowed", map[string]any{"enum": deepArray}, true},
		{"arrays one level too deep", map[string]any{"enum": []any{deepArray}}, false},
		{"100,000 levels", nested(100_000), false},
		// {"description":"…"} is 18 bytes around the string.
		{"exactly the size", map[string]any{"description": strings.Repeat("x", MaxSchemaBytes-18)}, true},
		{"one byte over the size", map[string]any{"description": strings.Repeat("x", MaxSchemaBytes-17)}, false},
		{"many properties within the size", wideSchema(2400), true},
		{"as many objects as allowed", map[string]any{"allOf": objects(MaxSchemaObjects - 1)}, true},
		{"one object too many", map[string]any{"allOf": objects(MaxSchemaObjects)}, false},
		{"many properties over the size", wideSchema(5000), false},
		{"bytes over the size", map[string]any{"x": make([]byte, MaxSchemaBytes)}, false},
		{"NaN", map[string]any{"maximum": math.NaN()}, false},
		{"infinity", map[string]any{"maximum": math.Inf(1)}, false},
		{"scalars of every kind", map[string]any{"a": nil, "b": true, "c": int64(3), "d": uint8(4), "e": 1.5, "f": float32(2), "g": []byte("x")}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := CheckSchema(tt.doc)
			runtime.ReadMemStats(&after)
			if (err == nil) != tt.ok {
				t.Fatalf("CheckSchema = %v, want ok %v", err, tt.ok)
			}
			if err == nil {
				if raw, _ := json.Marshal(tt.doc); len(raw) > MaxSchemaBytes {
					t.Errorf("CheckSchema passed %d bytes of JSON", len(raw))
				}
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
				t.Errorf("CheckSchema allocated %d KiB", grew>>10)
			}
		})
	}
}

// TestCompileSchemaChecksTheEncodedSize: CheckSchema counts a lower bound;
// characters that JSON escapes make the encoding longer, and CompileSchema
// measures it exactly before compiling.
func TestCompileSchemaChecksTheEncodedSize(t *testing.T) {
	doc := map[string]any{"description": strings.Repeat("<", MaxSchemaBytes/2)} // "\u003c" each
	if err := CheckSchema(doc); err != nil {
		t.Fatalf("CheckSchema: %v", err)
	}
	if _, err := CompileSchema(doc); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("CompileSchema = %v, want the size refused", err)
	}
}

// TestCompileSchemaBoundsPatterns: one 21 KB pattern would compile to about
// 130 MB; the patterns of a schema are measured before they are compiled.
func TestCompileSchemaBoundsPatterns(t *testing.T) {
	pattern := func(p string) map[string]any {
		return map[string]any{"type": "string", "pattern": p}
	}
	manyOf := func(n int, p string) map[string]any {
		props := map[string]any{}
		for i := range n {
			// Each differs, so none is compiled once for all.
			props[fmt.Sprintf("p%d", i)] = pattern(fmt.Sprintf("^%d", i) + p)
		}
		return map[string]any{"properties": props}
	}
	tests := []struct {
		name string
		doc  map[string]any
		ok   bool
	}{
		{"one huge pattern", pattern(strings.Repeat("a{1000}", 3000)), false},
		{"nested repetition", pattern("(a{1,100}){1,10}b{1,1000}"), true},
		{"too many large patterns", manyOf(30, ".{1,1000}"), false},
		{"a few large patterns", manyOf(20, ".{1,1000}"), true},
		{"one pattern used many times", map[string]any{"items": pattern(".{1,1000}"), "prefixItems": []any{
			pattern(".{1,1000}"), pattern(".{1,1000}"), pattern(".{1,1000}"), pattern(".{1,1000}"), pattern(".{1,1000}"), pattern(".{1,1000}"),
			pattern(".{1,1000}"), pattern(".{1,1000}"), pattern(".{1,1000}"), pattern(".{1,1000}"), pattern(".{1,1000}"), pattern(".{1,1000}"),
			pattern(".{1,1000}"), pattern(".{1,1000}"), pattern(".{1,1000}"), pattern(".{1,1000}"), pattern(".{1,1000}"), pattern(".{1,1000}"),
			pattern(".{1,1000}"), pattern(".{1,1000}"), pattern(".{1,1000}"), pattern(".{1,1000}"), pattern(".{1,1000}"), pattern(".{1,1000}"),
			pattern(".{1,1000}"), pattern(".{1,1000}"), pattern(".{1,1000}"), pattern(".{1,1000}"), pattern(".{1,1000}"), pattern(".{1,1000}"),
		}}, true},
		{"patternProperties count too", map[string]any{"patternProperties": map[string]any{strings.Repeat("b{1000}", 60): map[string]any{}}}, false},
		{"an invalid pattern", pattern("(unclosed"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			_, err := CompileSchema(tt.doc)
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			grew := after.TotalAlloc - before.TotalAlloc
			t.Logf("%v, %d KiB allocated: %v", took, grew>>10, err)
			if err != nil && len(err.Error()) > 600 {
				t.Errorf("error text of %d bytes", len(err.Error()))
			}
			if (err == nil) != tt.ok {
				t.Fatalf("CompileSchema = %v, want ok %v", err, tt.ok)
			}
			if grew > 64<<20 {
				t.Errorf("compiling allocated %d MiB", grew>>20)
			}
		})
	}
}

// TestCompileSchemaLargestAllowed compiles schemas at the limits, to show that
// none allowed is slow: the reason a compilation needs no bound of its own
// beyond the wait for it being cancellable (see
// TestSchemaCacheCompileHonoursContext) and how many run at once (see
// TestSchemaCacheBoundsCompilationsAtOnce).
func TestCompileSchemaLargestAllowed(t *testing.T) {
	var refs strings.Builder
	refs.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
	n := 0
	for ; refs.Len() < MaxSchemaBytes-1000; n++ {
		fmt.Fprintf(&refs, `"d%d":{"anyOf":[{"$ref":"#/$defs/d%d"},{"type":"integer"}]},`, n, n+1)
	}
	fmt.Fprintf(&refs, `"d%d":{"type":"string"}}}`, n)
	refChain := mustJSON(t, refs.String())
	for name, doc := range map[string]map[string]any{
		"widest":      wideSchema(2400),
		"deepest":     nested(MaxSchemaDepth),
		"longest ref": refChain,
		"most parts":  {"allOf": objects(MaxSchemaObjects - 1)},
	} {
		start := time.Now()
		if _, err := CompileSchema(doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		took := time.Since(start)
		t.Logf("%s: compiled in %v", name, took)
		if took > 20*time.Second { // generous: -race on a busy machine
			t.Errorf("%s: compiling took %v", name, took)
		}
	}
}

// countingCache is a cache of size whose compilations are counted and, while
// gate is open, held back until it is closed.
func countingCache(size int, gate chan struct{}) (*SchemaCache, *atomic.Int32) {
	c := NewSchemaCache(size)
	var n atomic.Int32
	compile := c.compile
	c.compile = func(raw []byte) (*Schema, error) {
		n.Add(1)
		if gate != nil {
			<-gate
		}
		return compile(raw)
	}
	return c, &n
}

func TestSchemaCacheCompilesEachSchemaOnce(t *testing.T) {
	c, compiled := countingCache(2, nil)
	ctx := context.Background()
	a := func() map[string]any { return map[string]any{"type": "object", "required": []any{"a"}} }
	first, err := c.Compile(ctx, a())
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Compile(ctx, a()) // an equal schema, decoded anew
	if err != nil || second != first {
		t.Fatalf("second compilation: %p, %v; want the cached %p", second, err, first)
	}
	bad := map[string]any{"type": 12}
	for range 2 {
		if _, err := c.Compile(ctx, bad); err == nil {
			t.Fatal("a schema that does not compile was accepted")
		}
	}
	if got := compiled.Load(); got != 2 {
		t.Fatalf("%d compilations for one good and one bad schema, want 2", got)
	}
	if _, err := c.Compile(ctx, map[string]any{"type": "string"}); err != nil {
		t.Fatal(err)
	}
	if c.held() != 2 {
		t.Fatalf("cache holds %d schemas, want its size 2", c.held())
	}
	if _, err := c.Compile(ctx, a()); err != nil { // evicted: compiled again
		t.Fatal(err)
	}
	if got := compiled.Load(); got != 4 {
		t.Fatalf("%d compilations, want 4 (the least recently used was evicted)", got)
	}
	if _, err := c.Compile(ctx, nested(MaxSchemaDepth+1)); err == nil || compiled.Load() != 4 {
		t.Fatalf("a schema over the limits: %v after %d compilations; want refused before compiling", err, compiled.Load())
	}
}

// TestSchemaCacheCompileHonoursContext is the shutdown path of a compilation:
// the compiler cannot be interrupted, so the wait for it is. A caller whose
// context ends returns at once; the compilation finishes in the background
// and serves the next request with the same schema. Requests waiting for one
// schema share its compilation.
func TestSchemaCacheCompileHonoursContext(t *testing.T) {
	gate := make(chan struct{})
	c, compiled := countingCache(4, gate)
	doc := map[string]any{"type": "string"}

	var waiting sync.WaitGroup
	shared := make(chan error, 1)
	waiting.Add(1)
	go func() {
		defer waiting.Done()
		_, err := c.Compile(context.Background(), doc)
		shared <- err
	}()
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan error, 1)
	go func() {
		_, err := c.Compile(ctx, doc)
		returned <- err
	}()
	time.Sleep(20 * time.Millisecond) // let both wait on the held compilation
	cancel()
	select {
	case err := <-returned:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Compile after cancel = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Compile did not return when its context ended")
	}
	close(gate)
	waiting.Wait()
	if err := <-shared; err != nil {
		t.Fatalf("the other waiter: %v", err)
	}
	if _, err := c.Compile(context.Background(), doc); err != nil {
		t.Fatal(err)
	}
	if got := compiled.Load(); got != 1 {
		t.Fatalf("%d compilations, want 1 shared by every caller", got)
	}
}

// heldCompilations replaces c's compiler with one that counts the
// compilations under way and started, and holds each back until gate is
// closed.
func heldCompilations(c *SchemaCache, gate chan struct{}) (running, started *atomic.Int32) {
	running, started = new(atomic.Int32), new(atomic.Int32)
	compile := c.compile
	c.compile = func(raw []byte) (*Schema, error) {
		running.Add(1)
		defer running.Add(-1)
		started.Add(1)
		<-gate
		return compile(raw)
	}
	return running, started
}

// distinctSchema is a small schema that differs for each i.
func distinctSchema(i int) map[string]any {
	return map[string]any{"type": "string", "description": fmt.Sprint(i)}
}

// TestSchemaCacheBoundsCompilationsAtOnce: the compiler cannot be
// interrupted, so a flood of distinct schemas, each within the limits, must
// not start a compilation apiece. Beyond the cache's compilers, callers wait
// for one to come free, and each of their schemas is still compiled once.
func TestSchemaCacheBoundsCompilationsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := runtime.GOMAXPROCS(0) + 6
		c := NewSchemaCache(n)
		compilers := cap(c.compilers)
		gate := make(chan struct{})
		running, started := heldCompilations(c, gate)
		errs := make(chan error, 2*n)
		for i := range n {
			for range 2 { // two callers share each compilation
				go func() {
					_, err := c.Compile(context.Background(), distinctSchema(i))
					errs <- err
				}()
			}
		}
		synctest.Wait() // every caller waits: for a compilation, or for a compiler
		if got := running.Load(); got != int32(compilers) {
			t.Errorf("%d compilations under way for %d distinct schemas, want the cache's %d compilers", got, n, compilers)
		}
		close(gate)
		for range 2 * n {
			if err := <-errs; err != nil {
				t.Errorf("a caller that waited for a compiler: %v", err)
			}
		}
		if got := started.Load(); got != int32(n) {
			t.Errorf("%d compilations for %d distinct schemas, want one each", got, n)
		}
	})
}

// TestSchemaCacheStartsNoCompilationNobodyWaitsFor: a caller that waits for
// a compiler waits under its own context and returns its error when it
// ends, as the ask endpoint does after compileWait. A schema whose every
// caller gave up before a compiler came free is not compiled then, which
// would cost the compiler for no one, but by the next caller that sends it.
func TestSchemaCacheStartsNoCompilationNobodyWaitsFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewSchemaCache(SchemaCacheSize)
		compilers := cap(c.compilers)
		gate := make(chan struct{})
		_, started := heldCompilations(c, gate)
		held := make(chan error, compilers)
		for i := range compilers {
			go func() {
				_, err := c.Compile(context.Background(), distinctSchema(i))
				held <- err
			}()
		}
		synctest.Wait() // every compiler busy
		const abandoned = 3
		for i := range abandoned {
			// The wait ends on the bubble's clock, which moves on
			// once every goroutine waits.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := c.Compile(ctx, distinctSchema(compilers+i))
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Compile waiting for a compiler = %v, want context.DeadlineExceeded", err)
			}
		}
		close(gate)
		for range compilers {
			if err := <-held; err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait() // whatever would start has started and ended
		if got := started.Load(); got != int32(compilers) {
			t.Fatalf("%d compilations started, want %d: none for the %d schemas no caller waits for", got, compilers, abandoned)
		}
		if _, err := c.Compile(context.Background(), distinctSchema(compilers)); err != nil {
			t.Fatalf("a schema sent again after its callers gave up: %v", err)
		}
		if got := started.Load(); got != int32(compilers)+1 {
			t.Fatalf("%d compilations started, want %d", got, compilers+1)
		}
	})
}

func TestSchemaCacheSurvivesACompilerPanic(t *testing.T) {
	c := NewSchemaCache(1)
	c.compile = func([]byte) (*Schema, error) { panic("boom") }
	if _, err := c.Compile(context.Background(), map[string]any{}); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Compile = %v, want the panic as an error", err)
	}
}

func mustJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(s), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// branchingDefs is a schema of n definitions, each "anyOf" two references to
// the next: 2^n paths for one value.
func branchingDefs(n int) string {
	var b strings.Builder
	b.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
	for i := range n {
		fmt.Fprintf(&b, `"d%d":{"anyOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]},`, i, i+1, i+1)
	}
	fmt.Fprintf(&b, `"d%d":{"type":"string"}}}`, n)
	return b.String()
}

// TestCompileSchemaBoundsEvaluations: references let a small schema make the
// validator, which cannot be interrupted, take exponential time on every
// answer. Such schemas are refused when compiled; schemas that are merely
// large or recursive are not.
func TestCompileSchemaBoundsEvaluations(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		ok   bool
	}{
		{"branching definitions (1.3 KB, 4 s per answer)", branchingDefs(20), false},
		{"branching definitions (2.6 KB, years per answer)", branchingDefs(40), false},
		{"a few branching definitions", branchingDefs(10), true},
		{"recursion that branches at every level", `{"$defs":{"n":{"type":"object","properties":{"c":{"anyOf":[{"$ref":"#/$defs/n"},{"$ref":"#/$defs/n"}]}}}},"$ref":"#/$defs/n"}`, false},
		{"recursion that branches through two paths", `{"$defs":{"n":{"properties":{"c":{"$ref":"#/$defs/m"},"d":{"$ref":"#/$defs/m"}}},"m":{"allOf":[{"$ref":"#/$defs/n"},{"$ref":"#/$defs/n"}]}},"$ref":"#/$defs/n"}`, false},
		{"a tree", `{"$defs":{"node":{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#/$defs/node"}}}}},"$ref":"#/$defs/node"}`, true},
		{"a linked list with a choice", `{"$defs":{"l":{"anyOf":[{"type":"null"},{"type":"object","properties":{"next":{"$ref":"#/$defs/l"}}}]}},"$ref":"#/$defs/l"}`, true},
		{"a reference to itself", `{"$defs":{"a":{"$ref":"#/$defs/a"}},"properties":{"x":{"$ref":"#/$defs/a"}}}`, true},
		{"dynamic references", `{"$dynamicAnchor":"node","type":"object","properties":{"kids":{"type":"array","items":{"$dynamicRef":"#node"}}}}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, err := CompileSchema(mustJSON(t, tt.doc))
			took := time.Since(start)
			if (err == nil) != tt.ok {
				t.Fatalf("CompileSchema = %v, want ok %v", err, tt.ok)
			}
			if took > 5*time.Second {
				t.Errorf("compiling took %v", took)
			}
		})
	}
	// The largest schemas allowed otherwise stay within the bound.
	if _, err := CompileSchema(wideSchema(2400)); err != nil {
		t.Errorf("the widest schema: %v", err)
	}
	if _, err := CompileSchema(map[string]any{"allOf": objects(MaxSchemaObjects - 1)}); err != nil {
		t.Errorf("as many parts as allowed: %v", err)
	}
}

// TestValidateBoundsAnswerDepth: a recursive schema admits answers of any
// depth, and checking one costs more the deeper it is; an answer deeper than
// MaxAnswerDepth is refused before it is parsed.
func TestValidateBoundsAnswerDepth(t *testing.T) {
	s, err := CompileSchema(mustJSON(t, `{"$defs":{"l":{"anyOf":[{"type":"null"},{"type":"object","properties":{"next":{"$ref":"#/$defs/l"}}}]}},"$ref":"#/$defs/l"}`))
	if err != nil {
		t.Fatal(err)
	}
	chainOf := func(depth int) string {
		return strings.Repeat(`{"next":`, depth) + `null` + strings.Repeat(`}`, depth)
	}
	if err := s.Validate(chainOf(MaxAnswerDepth)); err != nil {
		t.Errorf("an answer as deep as allowed: %v", err)
	}
	if err := s.Validate("```json\n" + chainOf(MaxAnswerDepth+1) + "\n```"); err == nil || !strings.Contains(err.Error(), "deeper than") {
		t.Errorf("an answer one level too deep: %v, want refused for its depth", err)
	}
	if err := s.Validate(`{"next":{"next":null},"note":"[[[[ ]]]] {{{{"}`); err != nil {
		t.Errorf("brackets inside a string counted: %v", err)
	}
	if !jsonDeeperThan(`[[["\"]"]]]`, 2) || jsonDeeperThan(`[["\\"],"[[["]`, 2) {
		t.Error("jsonDeeperThan misreads escapes inside strings")
	}
}

// TestValidateBoundsPatternWork: Go's matcher takes time in proportion to
// the pattern's program and the string, so a short pattern of many counted
// repetitions takes seconds on a few KB of answer. Matching stops at
// MaxPatternWork and the answer fails, saying why; ordinary patterns match
// long strings, and checks of one schema from many goroutines each get the
// whole budget.
func TestValidateBoundsPatternWork(t *testing.T) {
	heavy, err := CompileSchema(map[string]any{"type": "object", "properties": map[string]any{
		"a": map[string]any{"type": "string", "pattern": strings.Repeat(".{0,1000}", 20) + "x"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = heavy.Validate(`{"a":"` + strings.Repeat("a", 10_000) + `"}`)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("checking took %v", took)
	}
	if err == nil || !strings.Contains(err.Error(), "too long to check") {
		t.Fatalf("Validate = %v, want the pattern work refused", err)
	}

	light, err := CompileSchema(map[string]any{"type": "object", "properties": map[string]any{
		"a": map[string]any{"type": "string", "pattern": "^a+$"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := light.Validate(`{"a":"` + strings.Repeat("a", 100_000) + `"}`); err != nil {
				t.Errorf("a long string against a short pattern: %v", err)
			}
			if err := light.Validate(`{"a":"b"}`); err == nil {
				t.Error("a string against its pattern was accepted")
			}
		}()
	}
	wg.Wait()
}

// TestCompileSchemaSaysWhatIsWrongInPlainWords: a schema the compiler
// refuses is named by where in response_schema and what is wrong, never by
// the compiler's own URLs, metaschema or Go types: the text reaches the
// requester.
func TestCompileSchemaSaysWhatIsWrongInPlainWords(t *testing.T) {
	for _, tt := range []struct{ schema, want string }{
		{`{"type":"nope"}`, "response_schema is not a valid JSON Schema: at /type: value must be one of"},
		{`{"properties":{"a":{"type":5}}}`, "at /properties/a/type: value must be one of"},
		{`{"minLength":-1}`, "at /minLength: minimum: got -1, want 0"},
		{`{"required":"a"}`, "at /required: got string, want array"},
		{`{"pattern":"(("}`, "at /pattern: '((' is not valid regex"},
		{`{"$ref":"http://127.0.0.1:1/x"}`, `response_schema refers to "http://127.0.0.1:1/x" outside itself`},
		{`{"$ref":"file:///etc/passwd"}`, `response_schema refers to "file:///etc/passwd" outside itself`},
		{`{"$schema":"http://example.com/x"}`, `response_schema refers to "http://example.com/x" outside itself`},
		{`{"$ref":"#/$defs/nope"}`, `response_schema refers to "#/$defs/nope", which it does not hold`},
		{`{"$ref":"#foo"}`, `response_schema refers to "#foo", which it does not hold`},
		{`{"$dynamicRef":"#meta"}`, `response_schema refers to "#meta", which it does not hold`},
		{`{"$ref":"#/a~2"}`, `response_schema refers to "#/a~2", which is not a JSON pointer (RFC 6901)`},
		{`{"$defs":{"a":{"$anchor":"x"},"b":{"$anchor":"x"}}}`, `response_schema names the anchor "x" twice, at /$defs/a and /$defs/b`},
		// A reference that leads back to where it is, which no answer
		// could ever be checked against, is refused before any is.
		{`{"allOf":[{"$ref":"#"}]}`, "response_schema refers to itself in a loop: /allOf/0/$ref and / lead to the same place"},
		{`{"$ref":"other.json"}`, "response_schema refers to itself in a loop"},
		{`{"$ref":"  "}`, "response_schema refers to itself in a loop"},
	} {
		var doc map[string]any
		if err := json.Unmarshal([]byte(tt.schema), &doc); err != nil {
			t.Fatal(err)
		}
		_, err := CompileSchema(doc)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want it to say %q", tt.schema, err, tt.want)
			continue
		}
		for _, internal := range []string{"detour:response_schema", "metaschema", "json-schema.org", "URLLoader", "jsonschema", "json-pointer", "validation failed"} {
			if strings.Contains(err.Error(), internal) {
				t.Errorf("%s: err %q shows the compiler's internals (%q)", tt.schema, err, internal)
			}
		}
	}
}

// TestValidateSaysWhereTheAnswerFails: an answer that does not satisfy the
// schema is named by the first specific finding and its place in the
// answer, not by the validator's own wording of the whole tree.
func TestValidateSaysWhereTheAnswerFails(t *testing.T) {
	schema, err := CompileSchema(map[string]any{"type": "object", "required": []any{"a"},
		"properties": map[string]any{"a": map[string]any{"type": "integer"}}})
	if err != nil {
		t.Fatal(err)
	}
	for answer, want := range map[string]string{
		`{"a":"x"}`: "answer does not satisfy response_schema: at /a: got string, want integer",
		`{}`:        "answer does not satisfy response_schema: at /: missing property 'a'",
		`[1]`:       "answer does not satisfy response_schema: at /: got array, want object",
	} {
		err := schema.Validate(answer)
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", answer, err, want)
		}
	}
}

// TestCompileSchemaRefusesReferencesOutside: the compiler knows the
// metaschemas of json-schema.org by heart, so a $ref to one loaded no URL
// and passed; docs/requests.md allows references to the schema's own
// parts only. A reference with a scheme is refused before compiling.
func TestCompileSchemaRefusesReferencesOutside(t *testing.T) {
	for _, ref := range []string{"https://json-schema.org/draft/2020-12/meta/core", "http://json-schema.org/draft-07/schema#", "urn:example:x"} {
		for _, key := range []string{"$ref", "$dynamicRef"} {
			_, err := CompileSchema(map[string]any{"properties": map[string]any{"a": map[string]any{key: ref}}})
			if want := fmt.Sprintf("response_schema refers to %q outside itself", ref); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s %s: %v, want %q", key, ref, err, want)
			}
		}
	}
	// A property named $ref is no reference.
	if _, err := CompileSchema(map[string]any{"properties": map[string]any{"$ref": map[string]any{"type": "string"}}}); err != nil {
		t.Errorf("a property named $ref: %v", err)
	}
}

// TestAnAnswerThatIsNotJSONIsNamedByItsStart: an answer to a request with a
// schema that is not JSON is reported with its start, as `processor check`
// reports it, not in the JSON parser's words.
func TestAnAnswerThatIsNotJSONIsNamedByItsStart(t *testing.T) {
	s, err := CompileSchema(map[string]any{"type": "object"})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Validate("  fake says: answer in JSON, as asked, with everything you need")
	if want := `answer is not JSON; it begins "fake says: answer in JSON, as asked, wit…"`; err == nil || err.Error() != want {
		t.Fatalf("Validate = %v, want %s", err, want)
	}
}

// held returns how many schemas the cache holds, in any state.
func (c *SchemaCache) held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.recent.Len()
}
