// Package wait holds the one context-aware sleep that the retry loops of
// chain, stream and client share.
package wait
