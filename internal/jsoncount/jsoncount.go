// Package jsoncount counts the values of a JSON text without decoding it.
//
// A generic decode (into any, map[string]any, []any) costs far more than
// the text: an empty object is two bytes of JSON and a map of its own once
// decoded, so 14 MiB of [{},{},…] took about 300 MiB. Counting first, in
// one pass that allocates nothing, lets a caller refuse a text whose tree
// would be too large before anything builds it.
package jsoncount

// Values counts the values of data, a JSON text: every object, array,
// string, number, true, false and null, at any depth (an object's keys are
// names, not values: they are not counted). It stops counting past limit
// and reports whether the count passed it; a limit below zero counts all.
//
// On valid JSON the count is the number of values encoding/json reads
// (those of a repeated key included, which a decoded map keeps one of). On
// anything else it is some number that
// does not matter: such a text does not decode. It allocates nothing and
// reads each byte once.
func Values(data []byte, limit int) (n int, over bool) {
	inScalar := false // in a number, true, false or null
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '"':
			inScalar = false
			i = stringEnd(data, i+1)
			// A string followed by a colon is an object's key.
			j := i + 1
			for j < len(data) && isSpace(data[j]) {
				j++
			}
			if j < len(data) && data[j] == ':' {
				i = j
				continue
			}
			n++
		case '{', '[':
			inScalar = false
			n++
		case '}', ']', ',', ':', ' ', '\t', '\n', '\r':
			inScalar = false
			continue
		default:
			if inScalar {
				continue
			}
			inScalar = true
			n++
		}
		if limit >= 0 && n > limit {
			return n, true
		}
	}
	return n, false
}

// stringEnd returns the index of the quote that closes the string whose
// first byte is at i (len(data) if it is not closed).
func stringEnd(data []byte, i int) int {
	for ; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++ // the escaped byte (the rest of \uXXXX is plain)
		case '"':
			return i
		}
	}
	return len(data)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
