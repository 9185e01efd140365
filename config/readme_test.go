package config

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeCommands: README.md opens with the command that runs the
// service and the test command, and the test command is the one .ci/run
// runs, byte for byte.
func TestReadmeCommands(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "```sh\n")
	if ok {
		block, _, ok = strings.Cut(block, "```\n")
	}
	if !ok {
		t.Fatal("README.md has no sh block")
	}
	lines := strings.Split(strings.TrimSuffix(block, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("README.md's first block has %d lines, want the two commands:\n%s", len(lines), block)
	}
	command := func(line string) string { c, _, _ := strings.Cut(line, "#"); return strings.TrimSpace(c) }
	if got := command(lines[0]); got != "go run ./cmd/processor -demo" {
		t.Errorf("README.md's first command is %q, want go run ./cmd/processor -demo", got)
	}
	test := command(lines[1])
	ci, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "\n"+test+"\n") {
		t.Errorf("README.md's test command %q is not a line of .ci/run", test)
	}
}
