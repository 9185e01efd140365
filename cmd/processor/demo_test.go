package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDemoAnswersThePublisher is acceptance 7 of the core issue, with the
// real binaries: `processor -demo` starts with nothing else installed and
// `publisher "hello"` prints an answer with its model.
func TestDemoAnswersThePublisher(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs both binaries")
	}
	processorBin, publisherBin := buildCommand(t, "processor"), buildCommand(t, "publisher")
	env := append(os.Environ(), "DETOUR_LISTEN="+freeAddr(t), "DETOUR_METRICS_ADDR=", "DETOUR_DATA_DIR="+t.TempDir())

	var procOut bytes.Buffer
	proc := exec.Command(processorBin, "-demo")
	proc.Env, proc.Dir, proc.Stdout, proc.Stderr = env, t.TempDir(), &procOut, &procOut
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- proc.Wait() }()
	defer func() {
		_ = proc.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("processor exited with %v after SIGTERM\n%s", err, procOut.String())
			}
		case <-time.After(30 * time.Second):
			_ = proc.Process.Kill()
			t.Errorf("processor did not stop on SIGTERM")
		}
	}()

	// The publisher may start before the processor is ready; retry briefly.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out []byte
	var err error
	for ctx.Err() == nil {
		pub := exec.CommandContext(ctx, publisherBin, "-timeout", "20s", "hello")
		pub.Env = env
		if out, err = pub.CombinedOutput(); err == nil {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("publisher: %v\n%s\nprocessor log:\n%s", err, out, procOut.String())
	}
	line := regexp.MustCompile(`\bok\s+model=(\S+) provider=(\S+) degraded=(true|false)`)
	m := line.FindStringSubmatch(string(out))
	if m == nil || m[1] == "" || !strings.Contains(string(out), "answers: hello") {
		t.Fatalf("publisher printed no answer with its model:\n%s", out)
	}
	t.Logf("publisher: %s", strings.TrimSpace(string(out)))
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
