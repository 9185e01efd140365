package requestfile_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/detourhq/detour/cmd/internal/requestfile"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files")

// TestReadRequestsGolden: the bad lines of a requests file are named by line
// (and column, for JSON that does not parse) and by field, in the file's
// terms, never in Go's; the fields a line may have are listed once.
func TestReadRequestsGolden(t *testing.T) {
	path := filepath.Join("testdata", "bad-requests.jsonl")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = requestfile.Read(f, path, nil)
	if err == nil {
		t.Fatal("accepted")
	}
	got := err.Error() + "\n"
	for _, goTerm := range []string{"Go struct", "fileLine", "chain.Message", "json:", "[]"} {
		if strings.Contains(got, goTerm) {
			t.Errorf("the message speaks of %q", goTerm)
		}
	}
	golden := filepath.Join("testdata", "bad-requests.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update rewrites it):\n got:\n%s\nwant:\n%s", golden, got, want)
	}
}
