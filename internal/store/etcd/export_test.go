package etcd

import "context"

// SetCrashHook sets the function run at each point of a prewritten apply where
// a writer may die.
func SetCrashHook(f func(point string)) { crashHook = f }

// Reload reads the whole state again, as the watch does after a
// compaction or a skipped head version.
func Reload(s *Store) error {
	_, err := s.reload(context.Background())
	return err
}
