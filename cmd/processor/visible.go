package main

import "github.com/detourhq/detour/internal/text"

// errorText is err for a terminal (text.VisibleLines). An error may quote
// a name or value read from the bucket or a stored message; the line feeds between joined
// errors stay, since no such value holds one (a NATS subject or header
// value cannot).
func errorText(err error) string { return text.VisibleLines(err.Error()) }
