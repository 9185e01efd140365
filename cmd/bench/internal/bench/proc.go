package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stopGrace is how long a process has to exit after SIGTERM before it is
// killed; processors get a shorter DETOUR_SHUTDOWN_TIMEOUT.
const stopGrace = 10 * time.Second

// procSpec says how to start one process.
type procSpec struct {
	name    string
	argv    []string
	env     []string
	dir     string
	ready   string // a line of its output holding this means it is consuming
	metrics string // the host:port a processor serves its /metrics on
}

// proc is one running process of a pipeline. Whoever starts it stops it,
// however the run ends.
type proc struct {
	procSpec
	cmd   *exec.Cmd
	out   *outputTail
	ready chan struct{} // closed when the ready line is seen
	done  chan struct{} // closed when the process has exited
	err   error         // Wait's error, set before done is closed
}

func startProc(spec procSpec) (*proc, error) {
	p := &proc{procSpec: spec, ready: make(chan struct{}), done: make(chan struct{})}
	p.out = &outputTail{marker: spec.ready, found: p.ready}
	p.cmd = exec.Command(spec.argv[0], spec.argv[1:]...)
	p.cmd.Env, p.cmd.Dir, p.cmd.Stdout, p.cmd.Stderr = spec.env, spec.dir, p.out, p.out
	setProcAttr(p.cmd)
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", spec.name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM, waits stopGrace for the exit, then kills. It returns
// the exit error, or nil after a clean exit.
func (p *proc) stop() error {
	if !p.exited() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopGrace):
			_ = p.cmd.Process.Kill()
			<-p.done
			return fmt.Errorf("%s did not exit within %s of SIGTERM; killed", p.name, stopGrace)
		}
	}
	return p.err
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// cpuSample is the CPU time of every process of ps together so far, from
// /proc; ok is false if any could not be read.
func cpuSample(ps []*proc) (total time.Duration, ok bool) {
	for _, p := range ps {
		d, err := procCPU(p.cmd.Process.Pid)
		if err != nil || p.exited() {
			return 0, false
		}
		total += d
	}
	return total, true
}

// failure describes a process that exited when it should not have, with the
// end of its output.
func (p *proc) failure() error {
	return fmt.Errorf("%s exited (%v); its output ends:\n%s", p.name, p.err, p.out.tail())
}

// waitReady waits until every process has printed its ready line.
func waitReady(ctx context.Context, ps []*proc) error {
	deadline := time.After(readyTimeout)
	for _, p := range ps {
		select {
		case <-p.ready:
		case <-p.done:
			return p.failure()
		case <-deadline:
			return fmt.Errorf("%s not consuming after %s; its output ends:\n%s", p.name, readyTimeout, p.out.tail())
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

// stopProcs stops ps at once and returns every unclean exit.
func stopProcs(ps []*proc) error {
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			if err := p.stop(); err != nil {
				errs[i] = fmt.Errorf("%w; its output ends:\n%s", err, p.out.tail())
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// anyExited returns the failure of the first process of ps that has exited.
func anyExited(ps []*proc) error {
	for _, p := range ps {
		if p.exited() {
			return p.failure()
		}
	}
	return nil
}

// tailBytes is how much of a process's output is kept for error messages.
const tailBytes = 8 << 10

// outputTail keeps the end of a process's output and closes found once the
// output holds marker.
type outputTail struct {
	marker string
	found  chan struct{}

	mu   sync.Mutex
	buf  []byte // the last tailBytes or so
	seen bool
}

func (o *outputTail) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf = append(o.buf, b...)
	if !o.seen && bytes.Contains(o.buf, []byte(o.marker)) {
		o.seen = true
		close(o.found)
	}
	if len(o.buf) > 2*tailBytes {
		o.buf = append(o.buf[:0], o.buf[len(o.buf)-tailBytes:]...)
	}
	return len(b), nil
}

func (o *outputTail) tail() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.TrimRight(string(o.buf[max(0, len(o.buf)-tailBytes):]), "\n")
}

// processEnv is the environment of a child process: this one's without its
// DETOUR_* variables, then settings.
func processEnv(settings ...string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "DETOUR_") })
	return append(env, settings...)
}
