package etcd

// SetCrashHook sets the function run at each point of a prewritten apply where
// a writer may die.
func SetCrashHook(f func(point string)) { crashHook = f }
