package cmdutil

import (
	"fmt"

	"github.com/dustin/go-humanize"
)

// ByteSize is a flag that accepts sizes such as "256KiB" or "10MiB": the
// one size flag of every command.
type ByteSize int64

func (b *ByteSize) String() string { return humanize.IBytes(uint64(*b)) }
func (b *ByteSize) Type() string   { return "size" }
func (b *ByteSize) Set(s string) error {
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return fmt.Errorf("not a size (try 256KiB or 10MiB): %w", err)
	}
	if n == 0 || n > 1<<40 {
		return fmt.Errorf("size %s out of range", s)
	}
	*b = ByteSize(n)
	return nil
}
