package lock

// The owner record's format has one home: the files record_*.go of this
// package. Every reader and writer of hold's, whatever its protocol, goes
// through them, and a test (TestRecordFormatHasOneHome) fails when the
// format is spelled anywhere else.

// The JSON names of the record's keys. The encoder, the strict recogniser
// and the fast reader of the fence all spell them from here; Owner's
// struct tags, which encoding/json reads for DecodeOwner, must say the
// same (TestRecordKeysMatchOwnerTags holds them to it).
const (
	nameFence     = "fence"
	nameReleased  = "released"
	namePID       = "pid"
	nameHost      = "host"
	nameToken     = "token"
	nameStartedAt = "started_at"
	nameProcStart = "proc_start"
	namePIDNS     = "pid_ns"
	nameBootID    = "boot_id"
	nameCommand   = "command"
	nameShared    = "shared"
	nameProtocol  = "protocol"
	nameFields    = "fields"
)

// The keys as bit positions in IsRecord's set of the keys seen, and as
// indexes of recordKeys.
const (
	bitFence = iota
	bitReleased
	bitPID
	bitHost
	bitToken
	bitStartedAt
	bitProcStart
	bitPIDNS
	bitBootID
	bitCommand
	bitShared
	bitProtocol
	bitFields
)

// recordKeys is the table of the keys, in the order AppendEncode writes
// them.
var recordKeys = [...]string{
	bitFence:     nameFence,
	bitReleased:  nameReleased,
	bitPID:       namePID,
	bitHost:      nameHost,
	bitToken:     nameToken,
	bitStartedAt: nameStartedAt,
	bitProcStart: nameProcStart,
	bitPIDNS:     namePIDNS,
	bitBootID:    nameBootID,
	bitCommand:   nameCommand,
	bitShared:    nameShared,
	bitProtocol:  nameProtocol,
	bitFields:    nameFields,
}

// recordStart is how every record of hold's begins: the fence comes first,
// so that DecodeFence can read it without parsing the rest.
const recordStart = `{"` + nameFence + `":`

// releasedKey follows the fence's digits: the released flag comes second,
// so that IsPastRecord can tell a past record by its start alone.
const releasedKey = `,"` + nameReleased + `":`

// HasRecordPrefix reports whether b begins as every owner record hold
// writes begins. It is not a test of a whole record (IsRecord is): it
// tells a record that is longer than what was read, or one a crash tore,
// from other content, for a look made without the lock (which may catch a
// holder rewriting its record) or for listing what may be a lock file.
func HasRecordPrefix(b []byte) bool {
	return len(b) >= len(recordStart) && string(b[:len(recordStart)]) == recordStart
}
