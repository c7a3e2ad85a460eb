package etcdtest

import "syscall"

// procAttr puts the server in a process group of its own, which Stop kills
// whole, and has the kernel kill it if the test binary dies first.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
