package suggest

import "testing"

func TestDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "abc", 3}, {"abc", "", 3}, {"model", "model", 0},
		{"modle", "model", 1}, {"timout", "timeout", 1}, {"kitten", "sitting", 3},
		{"econmy", "economy", 1}, {"天气", "天", 1}, {"ab", "ba", 1},
	} {
		if got := Distance(tt.a, tt.b); got != tt.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := Distance(tt.b, tt.a); got != tt.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tt.b, tt.a, got, tt.want)
		}
	}
}

func TestClosest(t *testing.T) {
	keys := []string{"name", "type", "base_url", "model", "api_key_env", "timeout", "max_retries", "cooldown", "max_cooldown", "default_reply"}
	for _, tt := range []struct {
		word, want string
	}{
		{"modle", "model"},
		{"timout", "timeout"},
		{"Model", "model"},
		{"base-url", "base_url"},
		{"baseURL", "base_url"},
		{"api_key", "api_key_env"},
		{"max_retires", "max_retries"},
		{"cooldwon", "cooldown"},
		{"defaultreply", "default_reply"},
		{"nam", "name"},
		{"weight", ""},
		{"x", ""},
		{"nme", "name"},
		{"ty", ""},
		{"", ""},
		{"providers_list", ""},
		{"", ""},
	} {
		got, ok := Closest(tt.word, append(keys, ""))
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("Closest(%q) = %q, %v; want %q", tt.word, got, ok, tt.want)
		}
	}
}
