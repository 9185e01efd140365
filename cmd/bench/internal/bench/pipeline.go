package bench

import (
	"cmp"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/wire"
)

// pipeline is what a run measures: the baseline, or detour's processor.
type pipeline struct {
	name     string
	baseline bool
	subject  string // where requests are published
	stream   string // the requests stream
	consumer string
	results  string // the results stream
	prefix   string // results are stored under prefix + request id
}

var (
	baselinePipe = pipeline{name: "baseline", baseline: true, subject: baselineSubject,
		stream: baselineStream, consumer: baselineConsumer, results: baselineResults, prefix: baselinePrefix}
	detourPipe = pipeline{name: "detour", subject: wire.RequestSubject(benchChain),
		stream: wire.RequestsStream, consumer: wire.ConsumerName(benchChain), results: wire.ResultsStream,
		prefix: wire.ResultsPrefix}
)

// chainFile is a detour chain file and the fake providers it points at,
// which live as long as one run.
type chainFile struct {
	yaml  string
	file  *config.File
	fakes []*providertest.Server
}

func (c *chainFile) close() {
	for _, f := range c.fakes {
		f.Close()
	}
}

// fakeProvider is a chain file entry for an OpenAI-compatible fake on
// loopback; its tuning keys are the documented defaults, spelled out.
const fakeProvider = `  - name: %s
    type: openai
    base_url: %s
    model: bench-%s
    timeout: 30s
    max_retries: 1
    failure_threshold: 3
    cooldown: 10m
`

// rulesChain answers every request in process: no HTTP.
func rulesChain() (*chainFile, error) {
	return parseChain(`providers:
  - name: rules
    type: rules
    default_reply: "The AI service is having trouble; please try again shortly."
chains:
  default: [rules]
`)
}

// fakeChain calls one fake provider that answers as script says.
func fakeChain(script providertest.Script) (*chainFile, error) {
	fake := providertest.New(providertest.OpenAI, script)
	c, err := parseChain(fmt.Sprintf("providers:\n"+fakeProvider+"chains:\n  default: [fake]\n", "fake", fake.URL, "fake"))
	if err != nil {
		fake.Close()
		return nil, err
	}
	c.fakes = []*providertest.Server{fake}
	return c, nil
}

// outageChain puts a primary that always answers 500 before a healthy
// backup; fakes[0] is the dead one.
func outageChain() (*chainFile, error) {
	dead := providertest.New(providertest.OpenAI, providertest.Status(500))
	healthy := providertest.New(providertest.OpenAI, providertest.OK())
	c, err := parseChain(fmt.Sprintf("providers:\n"+fakeProvider+fakeProvider+"chains:\n  default: [dead, healthy]\n",
		"dead", dead.URL, "dead", "healthy", healthy.URL, "healthy"))
	if err != nil {
		dead.Close()
		healthy.Close()
		return nil, err
	}
	c.fakes = []*providertest.Server{dead, healthy}
	return c, nil
}

// parseChain checks a generated chain file as the processor will.
func parseChain(yaml string) (*chainFile, error) {
	f, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		return nil, fmt.Errorf("generated chain file: %w", err)
	}
	return &chainFile{yaml: yaml, file: f}, nil
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

// runDir makes a fresh directory for the processes of one run.
func (b *Bench) runDir() (string, error) {
	b.seq++
	dir := filepath.Join(b.dir, fmt.Sprintf("run-%d", b.seq))
	return dir, os.MkdirAll(dir, 0o700)
}

// baselineArgv is the command line of a baseline process with flags.
func (b *Bench) baselineArgv(flags ...string) []string {
	return append(append([]string{}, b.opts.BaselineCommand...), flags...)
}

// specs returns how to start each process of a run.
func (b *Bench) specs(run runSpec) ([]procSpec, error) {
	dir, err := b.runDir()
	if err != nil {
		return nil, err
	}
	specs := make([]procSpec, run.procs)
	if run.pipe.baseline {
		for i := range specs {
			argv := b.baselineArgv("-url", b.broker.url, "-workers", strconv.Itoa(run.workers))
			specs[i] = procSpec{name: fmt.Sprintf("baseline %d", i+1), argv: argv, env: processEnv(), dir: dir, ready: baselineReady}
		}
		return specs, nil
	}
	chainPath := filepath.Join(dir, "chain.yaml")
	if err := os.WriteFile(chainPath, []byte(run.chain.yaml), 0o600); err != nil {
		return nil, err
	}
	binary := cmp.Or(run.binary, b.processor)
	for i := range specs {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		env := processEnv(
			"DETOUR_NATS_URL="+b.broker.url,
			"DETOUR_CONFIG="+chainPath,
			"DETOUR_DATA_DIR="+filepath.Join(dir, "data"),
			"DETOUR_METRICS_ADDR="+addr,
			"DETOUR_WORKERS="+strconv.Itoa(run.workers),
			"DETOUR_MAX_ACK_PENDING="+strconv.Itoa(run.maxAckPending),
			"DETOUR_SHUTDOWN_TIMEOUT="+processorShutdown.String(),
			"DETOUR_LOG_LEVEL=info",
			"DETOUR_LOG_FORMAT=text",
		)
		specs[i] = procSpec{name: fmt.Sprintf("processor %d", i+1), argv: []string{binary}, env: env, dir: dir,
			ready: "msg=processing", metrics: addr}
	}
	return specs, nil
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
