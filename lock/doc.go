// Package lock is the contract between hold and a lock protocol, as io/fs
// is between os and a file system: the owner record and its codec, the
// error type and its sentinels, what Inspect reports (Status, Holder), the
// Protocol and Handle interfaces a protocol implements, and the optional
// capabilities hold looks for by name.
//
// Package hold aliases these types (hold.Owner is lock.Owner, hold.ErrBusy
// is lock.ErrBusy), so users of hold need not import this package; a
// protocol of a third party, chosen with hold.WithProtocol, needs only
// this one. Package holdtest checks that a protocol keeps the contract.
package lock
