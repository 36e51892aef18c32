package etcdtest

import "syscall"

// procAttr makes the kernel kill a member when the test binary dies: a
// test killed by its -timeout (or by hand) leaves no etcd running.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
