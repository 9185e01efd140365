package bench

import (
	"bytes"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/detourhq/detour/chain/providertest"
)

// The HTTP baseline holds every call at once on the provider, and reports
// what it measured of itself on one line that the bench reads back.
func TestHTTPBaselineHoldsEveryCallAndReportsItsMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	const calls = 20
	// A call is answered once every call is in the provider at the same
	// time, or after 10 s. A fixed delay would let a slow start on a loaded
	// machine answer the first calls before the last arrived; this way the
	// provider holds them all at once unless the baseline fails to make
	// them at once.
	var (
		mu      sync.Mutex
		waiting int
		all     = make(chan struct{})
	)
	fake := providertest.New(providertest.OpenAI, func(n int, req providertest.Request) providertest.Reply {
		mu.Lock()
		if waiting++; waiting == calls {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(10 * time.Second):
			mu.Lock()
			waiting--
			mu.Unlock()
		}
		return providertest.OK()(n, req)
	})
	defer fake.Close()
	var out bytes.Buffer
	if err := RunHTTPBaseline(t.Context(), fake.URL+"/chat/completions", calls, &out); err != nil {
		t.Fatal(err)
	}
	if got := fake.Requests(); got != calls {
		t.Errorf("the provider received %d calls, want %d", got, calls)
	}
	select {
	case <-all:
	default:
		t.Errorf("the provider never held all %d calls at once", calls)
	}
	res, err := parseHTTPBaseline(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 0 || res.Idle <= 0 || res.Peak < res.Idle {
		t.Errorf("measured %+v; want no failure and a peak at or above a positive idle", res)
	}
}

// A call that fails is counted, so that the bench does not divide a
// process's memory by calls it never held.
func TestHTTPBaselineCountsFailedCalls(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	fake := providertest.New(providertest.OpenAI, providertest.Status(500))
	defer fake.Close()
	var out bytes.Buffer
	if err := RunHTTPBaseline(t.Context(), fake.URL+"/chat/completions", 3, &out); err != nil {
		t.Fatal(err)
	}
	res, err := parseHTTPBaseline(out.String())
	if err != nil || res.Failed != 3 || !strings.Contains(res.FirstError, "500") {
		t.Errorf("parsed %+v, %v; want 3 failed calls, the first with its status", res, err)
	}
}

func TestParseHTTPBaselineRefusesOutputWithoutItsLine(t *testing.T) {
	for _, output := range []string{
		"",
		"panic: something\n",
		httpBaselineLine + "{not json\n",
		httpBaselineLine + `{"idle_bytes":1,"peak_bytes":2,"surprise":3}` + "\n",
	} {
		if res, err := parseHTTPBaseline(output); err == nil {
			t.Errorf("parseHTTPBaseline(%q) = %+v, want an error", output, res)
		}
	}
	res, err := parseHTTPBaseline("noise\n" + httpBaselineLine + `{"idle_bytes":1024,"peak_bytes":4096,"peak_from_vmhwm":true,"failed":0}` + "\n")
	if err != nil || res.Idle != 1024 || res.Peak != 4096 || !res.PeakFromHWM {
		t.Errorf("parsed %+v, %v", res, err)
	}
}
