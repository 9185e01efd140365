package deadletter

import "time"

// SetIdleTimeout sets how long a listing waits for the server before it
// asks the stream whether the rest is still there, until the test ends.
func SetIdleTimeout(t interface{ Cleanup(func()) }, d time.Duration) {
	old := idleTimeout
	idleTimeout = d
	t.Cleanup(func() { idleTimeout = old })
}
