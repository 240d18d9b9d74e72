package commands

// SweepEndpoints is how many Endpoints one retention sweep decides on.
const SweepEndpoints = sweepEndpoints
