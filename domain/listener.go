package domain

// Why another session became an Endpoint's primary (PrimaryChanged.Reason).
const (
	// PrimaryFirst: the first session to connect answers senders.
	PrimaryFirst = "first listener"
	// PrimaryAsked: the session asked to be primary (relay listen --primary).
	PrimaryAsked = "asked to be primary"
	// PrimaryLeft: the primary ended; the oldest session left takes over.
	PrimaryLeft = "primary left"
	// PrimaryNone: the last session ended.
	PrimaryNone = "no listener left"
)
