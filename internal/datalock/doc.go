// Package datalock keeps two processes off one data folder: `relay serve`,
// `relay events rebuild` and `relay accounts create --data` each take an
// exclusive lock on a file in the folder that names the holder's PID. The
// kernel drops the lock when the process ends, however it ends.
package datalock
