package bench

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/wire"
)

// pipeline is what a run measures: the baseline, or detour's processor.
type pipeline struct {
	baseline bool
	subject  string // where requests are published
	stream   string // the requests stream
	consumer string
	results  string // the results stream
	prefix   string // results are stored under prefix + request id
}

var (
	// The baseline's own streams and consumer, configured as detour's.
	baselinePipe = pipeline{baseline: true, subject: "bench.requests.default",
		stream: "BENCH_REQUESTS", consumer: "bench-default", results: "BENCH_RESULTS", prefix: "bench.results."}
	detourPipe = pipeline{subject: wire.RequestSubject(benchChain),
		stream: wire.RequestsStream, consumer: wire.ConsumerName(benchChain), results: wire.ResultsStream,
		prefix: wire.ResultsPrefix}
)

// chainFile is a chain file the bench writes for its processors (which
// check it as they start) and the fake providers it points at, which live
// as long as one run.
type chainFile struct {
	yaml  string
	fakes []*providertest.Server
}

func (c *chainFile) close() {
	for _, f := range c.fakes {
		f.Close()
	}
}

// The fakes' max_retries and failure_threshold, the documented defaults.
const fakeMaxRetries, fakeFailureThreshold = 1, 3

// fakeProvider is a chain file entry for an OpenAI-compatible fake on
// loopback; its tuning keys are the documented defaults, spelled out.
const fakeProvider = `  - name: %s
    type: openai
    base_url: %s
    model: bench-%[1]s
    timeout: 30s
    max_retries: %[3]d
    failure_threshold: %[4]d
    cooldown: 10m
`

// rulesChain answers every request in process: no HTTP.
func rulesChain() *chainFile {
	return &chainFile{yaml: `providers:
  - name: rules
    type: rules
    default_reply: "The AI service is having trouble; please try again shortly."
chains:
  default: [rules]
`}
}

// fakeChain calls a fake provider answering as scripts[0], named "fake",
// and then, for the outage, one answering as scripts[1], named "backup".
func fakeChain(scripts ...providertest.Script) *chainFile {
	names := []string{"fake", "backup"}[:len(scripts)]
	c := &chainFile{yaml: "providers:\n"}
	for i, script := range scripts {
		c.fakes = append(c.fakes, providertest.New(providertest.OpenAI, script))
		c.yaml += fmt.Sprintf(fakeProvider, names[i], c.fakes[i].URL, fakeMaxRetries, fakeFailureThreshold)
	}
	c.yaml += "chains:\n  default: [" + strings.Join(names, ", ") + "]\n"
	return c
}

// runSpec is one run's processes: procs of the pipeline, each with workers
// workers, on a consumer allowing maxAckPending.
type runSpec struct {
	pipe          pipeline
	procs         int
	workers       int
	maxAckPending int
	chain         *chainFile // detour only
	binary        string     // detour only: a processor other than the bench's
}

// processorShutdown is the DETOUR_SHUTDOWN_TIMEOUT of the bench's
// processors, well within stopGrace.
const processorShutdown = 5 * time.Second

// start starts the processes of run and waits until each is consuming. The
// caller stops them.
func (b *Bench) start(ctx context.Context, run runSpec) (ps []*proc, err error) {
	defer func() {
		if err != nil {
			_ = stopProcs(ps)
		}
	}()
	dir, err := os.MkdirTemp(b.dir, "run-")
	if err != nil {
		return nil, err
	}
	chainPath := filepath.Join(dir, "chain.yaml")
	if run.chain != nil {
		if err := os.WriteFile(chainPath, []byte(run.chain.yaml), 0o600); err != nil {
			return nil, err
		}
	}
	for i := range run.procs {
		spec := procSpec{name: fmt.Sprintf("baseline %d", i+1), env: processEnv(), dir: dir, ready: baselineReady,
			argv: append(slices.Clone(b.opts.BaselineCommand), "-url", b.broker.url, "-workers", strconv.Itoa(run.workers))}
		if !run.pipe.baseline {
			addr, err := freeAddr()
			if err != nil {
				return ps, err
			}
			spec = procSpec{name: fmt.Sprintf("processor %d", i+1), argv: []string{cmp.Or(run.binary, b.processor)},
				dir: dir, ready: "msg=processing", metrics: addr, env: processEnv(
					"DETOUR_NATS_URL="+b.broker.url,
					"DETOUR_CONFIG="+chainPath,
					"DETOUR_DATA_DIR="+filepath.Join(dir, "data"),
					"DETOUR_METRICS_ADDR="+addr,
					"DETOUR_WORKERS="+strconv.Itoa(run.workers),
					"DETOUR_MAX_ACK_PENDING="+strconv.Itoa(run.maxAckPending),
					"DETOUR_SHUTDOWN_TIMEOUT="+processorShutdown.String(),
					"DETOUR_LOG_LEVEL=info",
					"DETOUR_LOG_FORMAT=text",
				)}
		}
		p, err := startProc(spec)
		if err != nil {
			return ps, err
		}
		ps = append(ps, p)
	}
	return ps, waitReady(ctx, ps)
}

// freeAddr is a loopback address whose port was free a moment ago: every
// processor of a run serves its metrics on one of its own.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
