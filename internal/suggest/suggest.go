// Package suggest finds the known word a misspelt one most likely meant, for
// "did you mean" hints in error messages.
package suggest

import "strings"

// Closest returns the candidate nearest to word, and false when none is
// near enough to be worth suggesting. Case, '-' and '_' are ignored, a swap
// of two neighbouring letters counts as one edit, and the edits allowed grow
// with the word's length: none up to 2 letters, 1 up to 4, 2 up to 8, then 3. A candidate
// that word starts (api_key for api_key_env) or ends is also near. Ties go
// to the candidate listed first.
func Closest(word string, candidates []string) (string, bool) {
	w := fold(word)
	if w == "" {
		return "", false
	}
	best, bestDist := "", -1
	for _, c := range candidates {
		f := fold(c)
		if f == "" {
			continue
		}
		if f == w {
			return c, true
		}
		d := Distance(w, f)
		if len(w) >= 3 && (strings.HasPrefix(f, w) || strings.HasSuffix(f, w)) {
			d = min(d, 1)
		}
		if d <= allowed(len(w)) && (bestDist < 0 || d < bestDist) {
			best, bestDist = c, d
		}
	}
	return best, bestDist >= 0
}

func allowed(n int) int {
	switch {
	case n <= 2:
		return 0
	case n <= 4:
		return 1
	case n <= 8:
		return 2
	}
	return 3
}

func fold(s string) string {
	return strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(s))
}

// Distance is the optimal string alignment distance between a and b: the
// insertions, deletions, substitutions and swaps of neighbouring runes that
// turn one into the other.
func Distance(a, b string) int {
	s, t := []rune(a), []rune(b)
	// Three rows of the usual table: two back (for swaps), previous, current.
	prev2 := make([]int, len(t)+1)
	prev := make([]int, len(t)+1)
	cur := make([]int, len(t)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(s); i++ {
		cur[0] = i
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(t)]
}
