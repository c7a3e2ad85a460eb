//go:build !unix

package etcdtest

import (
	"errors"
	"syscall"
)

func procAttr() *syscall.SysProcAttr { return nil }

// signalGroup is not supported here: Stop relies on the process's exit.
func signalGroup(int, syscall.Signal) error {
	return errors.New("etcdtest: process groups are not supported on this system")
}
