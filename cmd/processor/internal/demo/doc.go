// Package demo sets up `processor -demo`: local fake providers (a primary
// that is down for its first minute, a healthy backup) and a rules template,
// plus a trickle of requests, so a newcomer sees a cooldown open, expire and
// close with nothing else installed.
package demo
