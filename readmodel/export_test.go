package readmodel

// LogBudgetWaiting is how many reads wait to start under b.
func LogBudgetWaiting(b *LogBudget) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiters.Len()
}
