package miniotest

import (
	"os/exec"
	"syscall"
)

// setProcessGroup puts the server in a process group of its own, so that
// Stop reaches everything it started, and has the kernel kill it if the
// test binary dies first (a timeout's panic, a kill -9): no server
// outlives its tests.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalGroup sends SIGTERM, or SIGKILL if kill, to the server's process
// group.
func signalGroup(cmd *exec.Cmd, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
}
