package domain

// Aggregate is what every aggregate shares: the events it raised since it was
// loaded, and the revision of its stream when loaded (to append with Exact).
type aggregate struct {
	version int64 // -1 until an event was applied from the store
	changes []Event
}

func newAggregate() aggregate { return aggregate{version: -1} }

func (a *aggregate) loaded() { a.version++ }

// Changes returns the events raised since the aggregate was loaded.
func (a *aggregate) Changes() []Event { return a.changes }

// Expected is the append condition that guards against concurrent writers.
func (a *aggregate) Expected() ExpectedRevision {
	if a.version < 0 {
		return NoStream()
	}
	return Exact(uint64(a.version))
}
