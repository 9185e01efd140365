package service_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/chain/providertest"
)

// The nats.js client and msgpack library the Node acceptance test installs
// from npm: known-good versions, pinned so that a run is repeatable.
var nodePackages = []string{"nats@2.29.3", "@msgpack/msgpack@3.1.3"}

// nodeScript publishes two requests with nats.js, as a Node user would, each
// with its own reply inbox, and prints each result it receives as one JSON
// line: {"which", "headers", "result", "types"}, types naming the JavaScript
// type of each metadata value. (a) is JSON whose metadata holds a number and
// a boolean; (b) is msgpack, encoded by @msgpack/msgpack, whose deadline is
// a JavaScript Date, which that library sends as a msgpack timestamp.
const nodeScript = `
const { connect, createInbox, headers } = require("nats");
const { encode, decode } = require("@msgpack/msgpack");

async function main() {
  const nc = await connect({ servers: process.argv[2] });
  const js = nc.jetstream();
  const subject = "detour.requests.default";
  const messages = [{ role: "user", content: "hello from node" }];

  const jsonInbox = createInbox();
  const mpInbox = createInbox();
  const replies = [];
  for (const [which, inbox, read] of [
    ["json", jsonInbox, (data) => JSON.parse(new TextDecoder().decode(data))],
    ["msgpack", mpInbox, (data) => decode(data)],
  ]) {
    const sub = nc.subscribe(inbox, { max: 1, timeout: 20000 });
    replies.push((async () => {
      for await (const m of sub) {
        const result = read(m.data);
        const hdrs = {};
        for (const [k, v] of m.headers) hdrs[k] = v.join(",");
        const types = {};
        for (const [k, v] of Object.entries(result.metadata || {})) types[k] = typeof v;
        console.log(JSON.stringify({ which, headers: hdrs, result, types }));
      }
    })());
  }
  await nc.flush();

  const jsonReq = { id: "node-json", messages, metadata: { n: 1, ok: true }, reply_to: jsonInbox };
  await js.publish(subject, new TextEncoder().encode(JSON.stringify(jsonReq)), { msgID: "node-json" });

  const mpReq = {
    id: "node-msgpack", messages, reply_to: mpInbox,
    deadline: new Date(Date.now() + 10 * 60 * 1000),
    metadata: { n: 2, f: 1.5, s: "x", none: null },
  };
  const body = encode(mpReq);
  const hasTimestamp = body.some((b, i) =>
    ((b === 0xd6 || b === 0xd7) && body[i + 1] === 0xff) || (b === 0xc7 && body[i + 1] === 12 && body[i + 2] === 0xff));
  if (!hasTimestamp) throw new Error("the msgpack request holds no timestamp");
  const h = headers();
  h.set("Content-Type", "application/msgpack");
  await js.publish(subject, body, { headers: h, msgID: "node-msgpack" });

  await Promise.all(replies);
  await nc.drain();
}

main().catch((err) => { console.error(err); process.exit(1); });
`

// nodeReply is one line nodeScript prints.
type nodeReply struct {
	Which   string            `json:"which"`
	Headers map[string]string `json:"headers"`
	Result  map[string]any    `json:"result"`
	Types   map[string]string `json:"types"`
}

// TestNodeClient is acceptance 2 of the request/reply issue: a Node script
// using nats.js, installed from npm, sends a JSON request whose metadata
// holds a number and a boolean, and a msgpack request whose deadline is a
// msgpack timestamp; both are answered on their inboxes, the metadata echoed
// as sent, numbers still numbers.
func TestNodeClient(t *testing.T) {
	modules := nodeModules(t)
	solo := providertest.New(providertest.OpenAI, providertest.OK())
	defer solo.Close()
	h := newHarness(t)
	h.startProcessor(parseChainFile(t, okChain(t, solo.URL)), testSettings())

	script := filepath.Join(t.TempDir(), "client.js")
	if err := os.WriteFile(script, []byte(nodeScript), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script, h.srv.ClientURL())
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node client: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}

	t.Logf("node client printed:\n%s", stdout.String())
	replies := map[string]nodeReply{}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r nodeReply
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("node printed %q: %v", sc.Text(), err)
		}
		replies[r.Which] = r
	}
	tests := []struct {
		which, id   string
		contentType string
		metadata    map[string]any
		types       map[string]string
	}{
		{"json", "node-json", "application/json", map[string]any{"n": 1.0, "ok": true},
			map[string]string{"n": "number", "ok": "boolean"}},
		{"msgpack", "node-msgpack", "application/msgpack", map[string]any{"n": 2.0, "f": 1.5, "s": "x", "none": nil},
			map[string]string{"n": "number", "f": "number", "s": "string", "none": "object"}},
	}
	for _, tt := range tests {
		r, ok := replies[tt.which]
		if !ok {
			t.Errorf("%s: no reply; node printed:\n%s%s", tt.which, stdout.String(), stderr.String())
			continue
		}
		if r.Result["status"] != "ok" || r.Result["id"] != tt.id || r.Result["content"] == "" {
			t.Errorf("%s: result %v, want ok", tt.which, r.Result)
		}
		if !reflect.DeepEqual(r.Result["metadata"], tt.metadata) || !reflect.DeepEqual(r.Types, tt.types) {
			t.Errorf("%s: metadata %v of types %v, want %v of types %v", tt.which, r.Result["metadata"], r.Types, tt.metadata, tt.types)
		}
		if r.Headers["Detour-Status"] != "ok" || r.Headers["Content-Type"] != tt.contentType || r.Headers["Detour-Request-Id"] != tt.id {
			t.Errorf("%s: headers %v", tt.which, r.Headers)
		}
	}
	if solo.Requests() != 2 {
		t.Errorf("provider called %d times, want 2", solo.Requests())
	}
}

// nodeModules returns a node_modules folder holding nodePackages, installed
// with npm once and kept in the user's cache folder for later runs. It
// skips the test when node or npm is missing, or npm cannot reach its
// registry.
func nodeModules(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping the Node client test: %s is not installed (%v)", tool, err)
		}
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	name := strings.NewReplacer("@", "", "/", "-").Replace(strings.Join(nodePackages, "+"))
	dir := filepath.Join(cache, "detour-test", "node", name)
	modules := filepath.Join(dir, "node_modules")
	if _, err := os.Stat(filepath.Join(dir, "installed")); err == nil {
		return modules
	}

	// Install beside the final folder, then move it into place, so that a
	// run stopped halfway, or another test process, never sees half a
	// node_modules.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "install-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append([]string{"install", "--no-audit", "--no-fund", "--no-save", "--prefer-offline", "--prefix", tmp}, nodePackages...)
	out, err := exec.CommandContext(ctx, "npm", args...).CombinedOutput()
	if err != nil {
		pingCtx, cancelPing := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancelPing()
		if ping, pingErr := exec.CommandContext(pingCtx, "npm", "ping").CombinedOutput(); pingErr != nil {
			t.Skipf("skipping the Node client test: npm cannot reach its registry to install %s (npm ping: %v)\n%s",
				strings.Join(nodePackages, ", "), pingErr, ping)
		}
		t.Fatalf("npm install %s: %v\n%s", strings.Join(nodePackages, " "), err, out)
	}
	if err := os.WriteFile(filepath.Join(tmp, "installed"), []byte(strings.Join(nodePackages, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "installed")); err != nil {
		_ = os.RemoveAll(dir) // what an interrupted run may have left
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "installed")); statErr != nil {
			t.Fatalf("keeping the installed packages: %v", errors.Join(err, statErr))
		}
		// Another test process installed them first.
	}
	return modules
}
