package etcd_test

func crashChildMain() bool { return false }
