//go:build !linux

package bench

import "os/exec"

// setProcAttr does nothing outside Linux: children are stopped by the bench
// itself, which cannot do so if it is killed.
func setProcAttr(*exec.Cmd) {}
