package config

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeChainFile: the chain file README.md shows is
// examples/detour.yaml, and it loads.
func TestReadmeChainFile(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "## Chain file\n")
	if ok {
		_, block, ok = strings.Cut(block, "```yaml\n")
	}
	if ok {
		block, _, ok = strings.Cut(block, "```\n")
	}
	if !ok {
		t.Fatal("README.md has no yaml block under ## Chain file")
	}
	example, err := os.ReadFile("../examples/detour.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if block != string(example) {
		t.Errorf("README.md's chain file and examples/detour.yaml differ:\n%s\n---\n%s", block, example)
	}
	t.Setenv("OPENAI_API_KEY", "sk-test")
	if _, err := Load("../examples/detour.yaml"); err != nil {
		t.Errorf("examples/detour.yaml: %v", err)
	}
}
