package chain

import (
	"fmt"
	"maps"
	"slices"

	"github.com/samber/lo"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Limits on what validating one answer may cost. References let a small
// schema branch without end (1.3 KB of definitions, each "anyOf" two
// references to the next, take 4 s to check true, doubling with each), and
// the validator cannot be interrupted.
const (
	// MaxSchemaEvaluations bounds, for each value of an answer, how many
	// parts of the schema may be checked against it: the paths through
	// applicators and references, for an answer MaxAnswerDepth deep.
	MaxSchemaEvaluations = 50_000
	// MaxAnswerDepth is the deepest nesting of objects and arrays an answer
	// checked against a response_schema may have: only a recursive schema
	// admits deeper answers, and no model writes them for a caller.
	MaxAnswerDepth = 128
)

// checkEvaluations refuses a compiled schema that could check one value of
// an answer against more than MaxSchemaEvaluations of its parts. It counts
// W_d(s), the paths from part s through at most d levels of the answer: s,
// the paths of the parts s applies in place (allOf, references, ...), and
// those of the parts one level down (properties, items, ...) with d-1
// levels, as if all applied to one child: an over-count, erring towards
// refusing. A loop that never descends counts once (the validator stops it).
func checkEvaluations(root *jsonschema.Schema) error {
	g := newSchemaGraph(root)
	prev := make([]int, len(g.nodes)) // W_{d-1}; W_{-1} is 0
	cur := make([]int, len(g.nodes))
	for d := 0; d <= MaxAnswerDepth; d++ {
		changed := false
		for _, i := range g.order { // in-place children before their parents
			w := 1 + g.loops[i]
			for _, c := range g.inPlace[i] {
				w += cur[c]
			}
			for _, c := range g.descend[i] {
				w += prev[c]
			}
			cur[i] = min(w, MaxSchemaEvaluations+1)
			changed = changed || cur[i] != prev[i]
		}
		if cur[0] > MaxSchemaEvaluations {
			return fmt.Errorf("response_schema: its references and applicators branch into more than %d paths for one value of the answer", MaxSchemaEvaluations)
		}
		if !changed { // no recursion goes deeper: W stays as it is
			return nil
		}
		prev, cur = cur, prev
	}
	return nil
}

// schemaGraph is a compiled schema as a graph of its parts, node 0 the
// root, with edges to parts of the same value (inPlace) or one level down.
type schemaGraph struct {
	nodes   []*jsonschema.Schema
	inPlace [][]int // without the edges that close a loop
	descend [][]int
	loops   []int // in-place edges that close a loop, per node
	order   []int // every node after the nodes it applies in place
}

func newSchemaGraph(root *jsonschema.Schema) *schemaGraph {
	g := &schemaGraph{}
	index := map[*jsonschema.Schema]int{}
	add := func(s *jsonschema.Schema, _ int) int {
		if i, ok := index[s]; ok {
			return i
		}
		index[s] = len(g.nodes)
		g.nodes = append(g.nodes, s)
		return len(g.nodes) - 1
	}
	add(root, 0)
	var rawInPlace [][]int
	for i := 0; i < len(g.nodes); i++ { // g.nodes grows as parts are found
		in, down := schemaEdges(g.nodes[i])
		rawInPlace = append(rawInPlace, lo.Map(in, add))
		g.descend = append(g.descend, lo.Map(down, add))
	}
	// A dynamic reference may land on any part with its anchor.
	dynamic := map[string][]int{}
	var recursive []int
	for i, s := range g.nodes {
		if s.DynamicAnchor != "" {
			dynamic[s.DynamicAnchor] = append(dynamic[s.DynamicAnchor], i)
		}
		if s.RecursiveAnchor {
			recursive = append(recursive, i)
		}
	}
	for i, s := range g.nodes {
		if s.DynamicRef != nil && s.DynamicRef.Anchor != "" {
			rawInPlace[i] = appendNew(rawInPlace[i], dynamic[s.DynamicRef.Anchor]...)
		}
		if s.RecursiveRef != nil {
			rawInPlace[i] = appendNew(rawInPlace[i], recursive...)
		}
	}
	g.sortInPlace(rawInPlace)
	return g
}

// appendNew appends the nodes of add that list does not hold yet: a dynamic
// reference lands on one of its targets, never two.
func appendNew(list []int, add ...int) []int {
	for _, n := range add {
		if !slices.Contains(list, n) {
			list = append(list, n)
		}
	}
	return list
}

// sortInPlace orders the nodes each after those it applies in place,
// setting aside edges that close a loop, with a stack of its own: chains of
// references can be thousands long.
func (g *schemaGraph) sortInPlace(raw [][]int) {
	const (
		unseen = iota
		open
		done
	)
	state := make([]uint8, len(g.nodes))
	g.inPlace = make([][]int, len(g.nodes))
	g.loops = make([]int, len(g.nodes))
	type frame struct{ node, next int }
	for start := range g.nodes {
		if state[start] != unseen {
			continue
		}
		state[start] = open
		stack := []frame{{start, 0}}
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.next == len(raw[f.node]) {
				state[f.node] = done
				g.order = append(g.order, f.node)
				stack = stack[:len(stack)-1]
				continue
			}
			c := raw[f.node][f.next]
			f.next++
			switch state[c] {
			case open:
				g.loops[f.node]++
			case unseen:
				state[c] = open
				g.inPlace[f.node] = append(g.inPlace[f.node], c)
				stack = append(stack, frame{c, 0})
			case done:
				g.inPlace[f.node] = append(g.inPlace[f.node], c)
			}
		}
	}
}

// schemaEdges returns the parts s applies to the same value and those it
// applies to values one level down.
func schemaEdges(s *jsonschema.Schema) (inPlace, descend []*jsonschema.Schema) {
	inPlace = []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else}
	if s.DynamicRef != nil {
		inPlace = append(inPlace, s.DynamicRef.Ref)
	}
	inPlace = slices.Concat(inPlace, s.AllOf, s.AnyOf, s.OneOf, slices.Collect(maps.Values(s.DependentSchemas)))
	for _, v := range s.Dependencies {
		if c, ok := v.(*jsonschema.Schema); ok {
			inPlace = append(inPlace, c)
		}
	}
	descend = slices.Concat(
		[]*jsonschema.Schema{s.PropertyNames, s.Contains, s.Items2020, s.UnevaluatedProperties, s.UnevaluatedItems, s.ContentSchema},
		slices.Collect(maps.Values(s.Properties)), slices.Collect(maps.Values(s.PatternProperties)), s.PrefixItems)
	for _, v := range []any{s.AdditionalProperties, s.AdditionalItems, s.Items} {
		switch v := v.(type) {
		case *jsonschema.Schema:
			descend = append(descend, v)
		case []*jsonschema.Schema:
			descend = append(descend, v...)
		}
	}
	return lo.Compact(inPlace), lo.Compact(descend)
}

// jsonDeeperThan reports whether the JSON text s nests deeper than limit,
// reading s once without allocating, before it is parsed.
func jsonDeeperThan(s string, limit int) bool {
	depth, inString, escaped := 0, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '{', c == '[':
			depth++
			if depth > limit {
				return true
			}
		case c == '}', c == ']':
			depth--
		}
	}
	return false
}
