package answersize

// Held is the heap the answers of caller hold now.
func (b *Budget) Held(caller string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byCaller[caller]
}
