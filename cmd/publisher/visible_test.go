package main

import (
	"strings"
	"testing"

	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/internal/text/texttest"
)

// TestProviderErrorIsPrintedAsEscapes: a provider that refuses a request
// (HTTP 400) with terminal controls in its message (a window title, a
// screen clear) has them printed as escapes in the failed
// result's error line.
func TestProviderErrorIsPrintedAsEscapes(t *testing.T) {
	solo := providertest.New(providertest.OpenAI, func(int, providertest.Request) providertest.Reply {
		return providertest.Reply{Status: 400, ErrorMessage: "bad input \x1b]0;pwned-by-provider\a\x1b[2J done\nFORGED LINE"}
	})
	defer solo.Close()
	startProcessor(t, soloChain(solo.URL))
	code, stdout, stderr := runPublisher(t, "-timeout", "20s", "poison me")
	if code != 1 {
		t.Fatalf("exit %d, want 1 for a failed request", code)
	}
	texttest.AssertVisible(t, stdout+stderr)
	if want := `bad input \x1b]0;pwned-by-provider\a\x1b[2J done`; !strings.Contains(stdout, "  error: ") || !strings.Contains(stdout, want) {
		t.Fatalf("stdout lacks an error line with %s:\n%s", want, stdout)
	}
}

// TestAnswerIsPrintedAsEscapes: an answer keeps its lines, and terminal
// controls in it are printed as escapes.
func TestAnswerIsPrintedAsEscapes(t *testing.T) {
	solo := providertest.New(providertest.OpenAI, providertest.Answer("one\x1b]52;c;cHduZWQ=\a\ntwo\r\x1b[K\u202e"))
	defer solo.Close()
	startProcessor(t, soloChain(solo.URL))
	code, stdout, _ := runPublisher(t, "-timeout", "20s", "hello")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	texttest.AssertVisible(t, stdout)
	if want := "  one\\x1b]52;c;cHduZWQ=\\a\ntwo\\r\\x1b[K\\u202e\n"; !strings.HasSuffix(stdout, want) {
		t.Fatalf("stdout %q, want it to end %q", stdout, want)
	}
}
