package sqlitedsn

import (
	"errors"

	"modernc.org/sqlite"
)

// SQLite's primary result codes for a file that is not what it should be.
const (
	codeCorrupt = 11 // SQLITE_CORRUPT: "database disk image is malformed"
	codeNotADB  = 26 // SQLITE_NOTADB: "file is not a database"
)

// ErrDamagedValue is a value read from a file that cannot be what was
// written there (stored data that does not decode): damage SQLite's own
// checks cannot see.
var ErrDamagedValue = errors.New("stored value damaged")

// Damaged reports whether err says that a SQLite file is damaged (a bad
// header, a truncated file, a malformed page, a value that does not decode)
// rather than that an operation failed on a sound file. The views treat
// such a file as lost and rebuild it; the log refuses to open it.
func Damaged(err error) bool {
	if errors.Is(err, ErrDamagedValue) {
		return true
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff { // extended codes keep the primary in the low byte
	case codeCorrupt, codeNotADB:
		return true
	}
	return false
}
