// Package ratelimit keeps one token bucket (golang.org/x/time/rate) per key
// — a client address, a public address — in a map whose size is bounded,
// and parses the "N/unit,burst=B" form the relay's rate flags take.
package ratelimit
