package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
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
	name  string
	argv  []string
	env   []string
	dir   string
	ready string // a line of its output holding this means it is consuming
	// metrics is the host:port a processor serves its /metrics on; ""
	// for other processes.
	metrics string
}

// proc is one running process of a pipeline.
type proc struct {
	procSpec
	cmd   *exec.Cmd
	out   *outputTail
	ready chan struct{} // closed when the ready line is seen
	done  chan struct{} // closed when the process has exited
	err   error         // Wait's error, set before done is closed
}

// procs are every process a Bench started and has not seen exit, so that
// each is stopped however the run ends.
type procs struct {
	mu  sync.Mutex
	all map[*proc]struct{}
}

func (ps *procs) start(spec procSpec) (*proc, error) {
	p := &proc{procSpec: spec, ready: make(chan struct{}), done: make(chan struct{})}
	p.out = &outputTail{marker: spec.ready, found: p.ready}
	p.cmd = exec.Command(spec.argv[0], spec.argv[1:]...)
	p.cmd.Env, p.cmd.Dir, p.cmd.Stdout, p.cmd.Stderr = spec.env, spec.dir, p.out, p.out
	setProcAttr(p.cmd)
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", spec.name, err)
	}
	ps.mu.Lock()
	if ps.all == nil {
		ps.all = map[*proc]struct{}{}
	}
	ps.all[p] = struct{}{}
	ps.mu.Unlock()
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
		ps.mu.Lock()
		delete(ps.all, p)
		ps.mu.Unlock()
	}()
	return p, nil
}

// stopAll stops every process still running, all at once.
func (ps *procs) stopAll() {
	ps.mu.Lock()
	var wg sync.WaitGroup
	for p := range ps.all {
		wg.Go(func() { _ = p.stop() })
	}
	ps.mu.Unlock()
	wg.Wait()
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

// liveCPU is the CPU time a running process has used so far, from /proc;
// ok is false where /proc cannot be read.
func (p *proc) liveCPU() (d time.Duration, ok bool) {
	d, err := procCPU(p.cmd.Process.Pid)
	return d, err == nil && !p.exited()
}

// exitCPU is the CPU time of the process's whole life, from its rusage; it
// waits for the exit.
func (p *proc) exitCPU() time.Duration {
	<-p.done
	return p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
}

// cpuSample is the CPU time of every process of ps together, from /proc;
// ok is false if any could not be read.
func cpuSample(ps []*proc) (total time.Duration, ok bool) {
	for _, p := range ps {
		d, live := p.liveCPU()
		if !live {
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
func waitReady(ctx context.Context, timeout time.Duration, ps []*proc) error {
	deadline := time.After(timeout)
	for _, p := range ps {
		select {
		case <-p.ready:
		case <-p.done:
			return p.failure()
		case <-deadline:
			return fmt.Errorf("%s not consuming after %s; its output ends:\n%s", p.name, timeout, p.out.tail())
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

// stopProcs stops ps at once and returns the first unclean exit.
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

// outputTail keeps the end of a process's output and closes found at the
// first line that holds marker.
type outputTail struct {
	marker string
	found  chan struct{}

	mu   sync.Mutex
	buf  []byte // the last tailBytes or so
	line []byte // the line being written, up to tailBytes
	seen bool
}

func (o *outputTail) Write(b []byte) (int, error) {
	n := len(b)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf = append(o.buf, b...)
	if len(o.buf) > 2*tailBytes {
		o.buf = append(o.buf[:0], o.buf[len(o.buf)-tailBytes:]...)
	}
	if o.seen {
		return n, nil
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			if len(o.line) < tailBytes {
				o.line = append(o.line, b...)
			}
			break
		}
		o.line = append(o.line, b[:i]...)
		b = b[i+1:]
		if strings.Contains(string(o.line), o.marker) {
			o.seen = true
			close(o.found)
			break
		}
		o.line = o.line[:0]
	}
	return n, nil
}

func (o *outputTail) tail() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := o.buf
	if len(b) > tailBytes {
		b = b[len(b)-tailBytes:]
	}
	return strings.TrimRight(string(b), "\n")
}

// processEnv is the environment of a child process: this one's without its
// DETOUR_* variables, then settings.
func processEnv(settings ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DETOUR_") {
			env = append(env, kv)
		}
	}
	return append(env, settings...)
}
