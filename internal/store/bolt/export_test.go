package bolt

// SetStageHook sets a function called after each transaction of bodies
// staged by a large Apply.
func SetStageHook(f func(n int)) { stageHook = f }
