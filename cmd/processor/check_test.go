package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/detourhq/detour/chain/providertest"
)

// TestCheckCommand runs `processor check` over two samples (one with a
// response_schema) against a good provider, one answering empty, and one
// answering 500: a provider × sample table, one call per pair without
// retries, and exit 1 because of the failures; exit 0 for the good one alone.
func TestCheckCommand(t *testing.T) {
	good := providertest.New(providertest.OpenAI, providertest.JSON(map[string]any{"answer": "yes"}))
	defer good.Close()
	empty := providertest.New(providertest.Anthropic, providertest.Empty())
	defer empty.Close()
	down := providertest.New(providertest.OpenAI, providertest.Status(500))
	defer down.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "detour.yaml")
	writeFile(t, cfg, fmt.Sprintf(`
providers:
  - {name: good, type: openai, base_url: %s, model: m-good, max_retries: 3}
  - {name: empty, type: anthropic, base_url: %s, model: m-empty}
  - {name: down, type: openai, base_url: %s, model: m-down, max_retries: 3}
chains:
  default: [good, empty, down]
  healthy: [good]
`, good.URL, empty.URL, down.URL))
	samples := filepath.Join(dir, "samples.jsonl")
	writeFile(t, samples, `{"messages":[{"role":"user","content":"hello"}]}

{"messages":[{"role":"user","content":"answer in JSON"}],"response_schema":{"type":"object","required":["answer"]}}
`)

	var out, errOut bytes.Buffer
	code := run([]string{"check", "-samples", samples, "-config", cfg}, &out, &errOut)
	if code != 1 {
		t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	table := out.String()
	// Samples without an id are named by their line in the file.
	for _, want := range []string{"line 1", "line 3", "good", "FAIL invalid_output", "FAIL server", "down on line 1:"} {
		if !strings.Contains(table, want) {
			t.Errorf("output lacks %q:\n%s", want, table)
		}
	}
	goodRow := strings.Fields(strings.Split(table, "\n")[1])
	if len(goodRow) < 6 || goodRow[0] != "good" || goodRow[2] != "ok" || goodRow[4] != "ok" {
		t.Errorf("good row %q, want ok for both samples", goodRow)
	}
	for _, s := range []*providertest.Server{good, empty, down} {
		if s.Requests() != 2 {
			t.Errorf("a provider received %d calls, want 2 (one per sample, no retries)", s.Requests())
		}
	}

	out.Reset()
	if code := run([]string{"check", "-samples", samples, "-config", cfg, "-chain", "healthy"}, &out, &errOut); code != 0 {
		t.Fatalf("healthy chain: exit %d\n%s", code, out.String())
	}

	for chain, want := range map[string]string{
		"helthy": `processor check: no chain named "helthy" in ` + cfg + ` (did you mean "healthy"?)` + "\n",
		"other":  `processor check: no chain named "other" in ` + cfg + ` (its chains: default, healthy)` + "\n",
	} {
		errOut.Reset()
		if code := run([]string{"check", "-samples", samples, "-config", cfg, "-chain", chain}, &out, &errOut); code != 2 || errOut.String() != want {
			t.Errorf("-chain %s: exit %d, stderr %q; want 2 and %q", chain, code, errOut.String(), want)
		}
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCheckDemoWithConfig: -demo names the chain to check, so it does not
// go with -config.
func TestCheckDemoWithConfig(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"check", "-demo", "-config", "detour.yaml", "-samples", "../../examples/samples.jsonl"}, &out, &errOut)
	if code != 2 || errOut.String() != "processor check: give -demo or -config, not both\n" || out.Len() != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}

// TestCheckWithoutAChainFileSaysHowToName: with no chain file where it
// looks, check says how to name one, or to check the demo's chain.
func TestCheckWithoutAChainFileSaysHowToName(t *testing.T) {
	samples, err := filepath.Abs("../../examples/samples.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("DETOUR_CONFIG", "") // restored after the test
	if err := os.Unsetenv("DETOUR_CONFIG"); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	var out, errOut bytes.Buffer
	code := run([]string{"check", "-samples", samples}, &out, &errOut)
	if code != 78 || !strings.Contains(errOut.String(), "detour.yaml") || !strings.Contains(errOut.String(), "-config FILE") || !strings.Contains(errOut.String(), "-demo") {
		t.Fatalf("exit %d, stderr %q; want 78 naming detour.yaml, -config FILE and -demo", code, errOut.String())
	}
}
