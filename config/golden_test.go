package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update rewrites it):\n got:\n%s\nwant:\n%s", path, got, want)
	}
}

// TestLoadReportsEveryProblem: a chain file with problems of every kind is
// refused with all of them, one a line, each with its line number, and the
// known keys listed once at the end.
func TestLoadReportsEveryProblem(t *testing.T) {
	_, err := Load(filepath.Join("testdata", "bad.yaml"))
	var fe *FileError
	if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("Load() = %v, want a *FileError", err)
	}
	golden(t, "bad.golden", err.Error()+"\n")
}
