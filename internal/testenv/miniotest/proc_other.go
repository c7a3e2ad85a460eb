//go:build !linux

package miniotest

import (
	"os"
	"os/exec"
)

// setProcessGroup does nothing where process groups are not used; Stop
// signals the server process alone.
func setProcessGroup(cmd *exec.Cmd) {}

// signalGroup ends the server process: politely unless kill.
func signalGroup(cmd *exec.Cmd, kill bool) {
	if kill {
		_ = cmd.Process.Kill()
		return
	}
	_ = cmd.Process.Signal(os.Interrupt)
}
