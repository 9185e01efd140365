package bench

import (
	"os/exec"
	"syscall"
)

// setProcAttr has the kernel kill a child whose bench dies without stopping
// it (SIGKILL from outside, a crash), so that no processor outlives a run.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
