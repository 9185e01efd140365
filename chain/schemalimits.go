package chain

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/url"
	"reflect"
	"regexp"
	"regexp/syntax"
	"sync"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Limits on a request's response_schema, whose cost is far out of
// proportion to its size: n levels deep cost about n³ to compile (20 KB of
// {"items": … took 11.6 s and 16.5 GB), and a 21 KB pattern can compile to
// 130 MB. Each is checked before the work it bounds.
const (
	// MaxSchemaBytes is the largest response_schema, in bytes of its JSON;
	// real ones are a few KiB, and 64 KiB compiles well under a second.
	MaxSchemaBytes = 64 << 10
	// MaxSchemaDepth is the deepest nesting of objects and arrays in a
	// response_schema, the schema itself being level 1: a nested property
	// costs two levels, so about 15 levels of nested objects in the answer.
	MaxSchemaDepth = 32
	// MaxSchemaObjects is the most JSON objects a response_schema may hold.
	// The compiler's cost grows with their square: 20,000 empty ones take
	// 2.3 s, 5,000 under 0.3 s. Real schemas have hundreds.
	MaxSchemaObjects = 5_000
	// MaxSchemaPatternSize bounds the regular expressions of a
	// response_schema, in compiled program instructions, all together:
	// "a{1000}" is seven bytes and a thousand instructions of about 40
	// bytes. 50,000 is a few dozen realistic patterns, or 2 MB.
	MaxSchemaPatternSize = 50_000
	// MaxPatternWork bounds the regexp work of checking one answer, in
	// program instructions times bytes matched, all patterns together: a
	// 226-byte pattern of 25,000 instructions takes 9 s on a 10 KB string.
	// 50,000,000 is about a second; an answer that needs more fails.
	MaxPatternWork = 50_000_000
)

// outsideRef refuses a reference of v that names a scheme (https:, file:):
// the compiler loads none, but knows json-schema.org's metaschemas by heart
// and would follow a $ref to one.
func outsideRef(v map[string]any) error {
	for _, key := range []string{"$ref", "$dynamicRef", "$recursiveRef"} {
		ref, ok := v[key].(string)
		if !ok {
			continue
		}
		if u, err := url.Parse(ref); err == nil && u.Scheme != "" {
			return outsideRefError(ref)
		}
	}
	return nil
}

// CheckSchema refuses a response_schema over MaxSchemaDepth, MaxSchemaBytes
// or MaxSchemaObjects, holding a number JSON cannot carry, or referring
// outside itself. It walks without recursing and stops at the first limit
// passed, so its cost is bounded by the limits: it runs before the schema
// is marshalled or compiled. The size it counts is a lower bound of the
// JSON; CompileSchema checks the exact size.
func CheckSchema(doc map[string]any) error {
	type node struct {
		v     any
		depth int
	}
	stack := []node{{doc, 1}}
	size, objects := 0, 0
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		switch v := n.v.(type) {
		case map[string]any:
			if n.depth > MaxSchemaDepth {
				return fmt.Errorf("response_schema nests deeper than %d levels", MaxSchemaDepth)
			}
			if objects++; objects > MaxSchemaObjects {
				return fmt.Errorf("response_schema holds more than %d objects", MaxSchemaObjects)
			}
			size += len(`{}`) + max(len(v)-1, 0) // braces and commas
			if err := outsideRef(v); err != nil {
				return err
			}
			for k, e := range v {
				size += len(k) + len(`"":`)
				if size > MaxSchemaBytes {
					break
				}
				stack = append(stack, node{e, n.depth + 1})
			}
		case []any:
			if n.depth > MaxSchemaDepth {
				return fmt.Errorf("response_schema nests deeper than %d levels", MaxSchemaDepth)
			}
			size += len(`[]`) + max(len(v)-1, 0) // brackets and commas
			if size > MaxSchemaBytes {
				break
			}
			for _, e := range v {
				stack = append(stack, node{e, n.depth + 1})
			}
		case string:
			size += len(v) + len(`""`)
		case []byte: // msgpack bin, marshalled as base64
			size += base64.StdEncoding.EncodedLen(len(v)) + len(`""`)
		case float32, float64:
			if f := reflect.ValueOf(v).Float(); math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Errorf("response_schema holds %v, which JSON cannot carry", v)
			}
			size++
		case nil:
			size += len(`null`)
		case bool:
			size += len(`true`)
		default: // integers and the like: a digit at least
			size++
		}
		if size > MaxSchemaBytes {
			return fmt.Errorf("response_schema is larger than %d bytes as JSON", MaxSchemaBytes)
		}
	}
	return nil
}

// patternBudget compiles the regular expressions of one schema while their
// total program size stays within MaxSchemaPatternSize, each measured from
// its parse tree before compiling would expand its repetitions. It serves
// one compilation, then is closed.
type patternBudget struct {
	left int
	// seen holds the patterns compiled so far: the compiler meets each twice
	// (metaschema check, then compiling), and a repeated one costs memory once.
	seen  map[string]*boundedRegexp
	match *matchBudget
	// closed is set once the compilation is over: the validator compiles
	// patterns only for "format": "regex", which detour does not assert;
	// should it ever, it gets an error rather than a shared map.
	closed atomic.Bool
}

// compile is a jsonschema.RegexpEngine.
func (b *patternBudget) compile(s string) (jsonschema.Regexp, error) {
	if b.closed.Load() {
		return nil, errors.New("patterns are compiled only with the response_schema")
	}
	if re, ok := b.seen[s]; ok {
		return re, nil
	}
	tree, err := syntax.Parse(s, syntax.Perl)
	if err != nil {
		return nil, err
	}
	size := progSize(tree)
	if size > b.left {
		return nil, fmt.Errorf("the patterns of response_schema are too large: over %d regexp instructions in all", MaxSchemaPatternSize)
	}
	compiled, err := regexp.Compile(s)
	if err != nil {
		return nil, err
	}
	b.left -= size
	re := &boundedRegexp{Regexp: compiled, size: max(size, 1), budget: b.match}
	b.seen[s] = re
	return re, nil
}

// matchBudget is what is left of MaxPatternWork while one answer is
// checked; Validate holds mu for the whole check.
type matchBudget struct {
	mu    sync.Mutex
	left  int
	spent bool // a pattern was not tried for want of budget
}

// boundedRegexp is a pattern that matches only within its schema's budget.
type boundedRegexp struct {
	*regexp.Regexp
	size   int // estimated program instructions
	budget *matchBudget
}

// MatchString reports whether s contains a match; once the budget is
// spent, no match, and the budget marked spent. It runs under budget.mu.
func (r *boundedRegexp) MatchString(s string) bool {
	work := r.size * max(len(s), 1)
	if work > r.budget.left {
		r.budget.left, r.budget.spent = 0, true
		return false
	}
	r.budget.left -= work
	return r.Regexp.MatchString(s)
}

// maxProgSize is where progSize stops counting, so nesting cannot overflow.
const maxProgSize = 1 << 30

// progSize estimates the instructions the regexp compiler emits for re, a
// counted repetition being its body that many times. The parser bounds the
// tree's height at 1,000.
func progSize(re *syntax.Regexp) int {
	var n int
	switch re.Op {
	case syntax.OpLiteral:
		n = len(re.Rune)
	case syntax.OpRepeat:
		count := re.Max
		if count < 0 { // x{n,}: n copies and a star
			count = re.Min + 1
		}
		n = max(count, 1) * (progSize(re.Sub[0]) + 1)
	default:
		n = 1
		for _, sub := range re.Sub {
			n += progSize(sub)
		}
	}
	return min(n, maxProgSize)
}
