package lease

// SetBeforeRegister makes every Acquire call f after its write landed and
// before the lease is registered: a test stands for a slow reply with it.
func (lv *Liveness) SetBeforeRegister(f func(runID string)) { lv.beforeRegister = f }
