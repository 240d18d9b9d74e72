package record

// HeldReceipts is how many receipts r keeps for their answer.
func HeldReceipts(r *Recorder) int {
	r.heldMu.Lock()
	defer r.heldMu.Unlock()
	return len(r.held)
}
