//go:build unix

package etcdtest

import (
	"errors"
	"syscall"
)

func processExists(pid int) bool { return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }
