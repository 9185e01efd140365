package main

import "time"

// fleetReplies is how long status waits for running processors to say
// what they run.
const fleetReplies = 500 * time.Millisecond
