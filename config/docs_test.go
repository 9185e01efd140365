package config

import (
	"os"
	"strings"
	"testing"
)

// TestDocsChainFile: the chain file docs/settings.md shows with every key
// at its default is examples/detour.yaml, and it loads.
func TestDocsChainFile(t *testing.T) {
	doc, err := os.ReadFile("../docs/settings.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "### Every key at its default\n")
	if ok {
		_, block, ok = strings.Cut(block, "```yaml\n")
	}
	if ok {
		block, _, ok = strings.Cut(block, "```\n")
	}
	if !ok {
		t.Fatal("docs/settings.md has no yaml block under ### Every key at its default")
	}
	example, err := os.ReadFile("../examples/detour.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if block != string(example) {
		t.Errorf("docs/settings.md's chain file and examples/detour.yaml differ:\n%s\n---\n%s", block, example)
	}
	t.Setenv("OPENAI_API_KEY", "sk-test")
	if _, err := Load("../examples/detour.yaml"); err != nil {
		t.Errorf("examples/detour.yaml: %v", err)
	}
}
