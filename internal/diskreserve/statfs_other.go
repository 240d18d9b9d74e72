//go:build !(linux || darwin || freebsd)

package diskreserve

import "errors"

// Space is not read where statfs is missing: the reserve then refuses
// nothing (Reserve logs why once).
func (s Statfs) Space() (Space, error) {
	return Space{}, errors.New("free disk space is not read on this system")
}
