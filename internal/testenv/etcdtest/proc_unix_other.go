//go:build unix && !linux

package etcdtest

import "syscall"

// procAttr puts the server in a process group of its own, which Stop kills
// whole.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
