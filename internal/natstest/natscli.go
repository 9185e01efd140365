package natstest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// NATSCLIModule is the nats CLI that NATSCLI builds when none is on PATH.
const NATSCLIModule = "github.com/nats-io/natscli/nats@v0.5.0"

var natscliMu sync.Mutex

// NATSCLI returns the path of the nats CLI (github.com/nats-io/natscli) for a
// test to run: `nats` on PATH, else NATSCLIModule, built once with `go
// install` into the user's cache directory (detour-test/natscli-v0.5.0) and
// reused by later runs. It skips the test when that build fails for want of
// a network; any other failure fails the test. The first build downloads
// the CLI's modules and takes a few minutes.
func NATSCLI(t testing.TB) string {
	t.Helper()
	if path, err := exec.LookPath("nats"); err == nil {
		return path
	}
	natscliMu.Lock()
	defer natscliMu.Unlock()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "detour-test", "natscli-v0.5.0")
	name := "nats"
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	cacheErr := fatalIf(t, "nats CLI cache")
	cacheErr(os.MkdirAll(dir, 0o755))
	// Built into a directory of its own and renamed into place, so that a
	// test binary of another package building at the same time never sees
	// half a file.
	gobin, err := os.MkdirTemp(dir, "build-")
	cacheErr(err)
	defer os.RemoveAll(gobin)
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("natstest: no `nats` on PATH and no `go` to build %s", NATSCLIModule)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "install", NATSCLIModule)
	cmd.Dir = gobin // outside this module: `go install pkg@version` ignores it anyway
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOWORK=off", "GOFLAGS=")
	t.Logf("natstest: building %s (no `nats` on PATH); the first build takes a few minutes", NATSCLIModule)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if offline(string(out)) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Skipf("natstest: no `nats` on PATH, and %s cannot be built without a network: %v\n%s", NATSCLIModule, err, lastLines(string(out), 5))
		}
		t.Fatalf("natstest: building %s: %v\n%s", NATSCLIModule, err, out)
	}
	cacheErr(os.Rename(filepath.Join(gobin, name), bin))
	return bin
}

// offline reports whether go's output says it could not reach the module
// proxy or a repository.
func offline(out string) bool {
	return slices.ContainsFunc([]string{
		"dial tcp", "no such host", "connection refused", "i/o timeout", "network is unreachable",
		"TLS handshake timeout", "proxyconnect", "Temporary failure in name resolution",
		"server misbehaving", "connection reset", "GOPROXY=off", "module lookup disabled",
	}, func(s string) bool { return strings.Contains(out, s) })
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
