"""The owner record a holder publishes: what ``Lock.owner`` and ``hold
status`` show. The keys are the Go codec's (lock.Owner in the repository);
tests/test_owner_type.py checks them against lock/testdata/records.json,
the records hold writes."""

from __future__ import annotations

from typing import Dict, List, TypedDict


class Owner(TypedDict, total=False):
    """Who holds a lock. Every key may be missing in a record another tool
    wrote; hold writes ``pid``, ``started_at``, ``fence`` and ``released``
    always."""

    #: The holder's process id on ``host``.
    pid: int
    #: The holder's host name.
    host: str
    #: A random id of this one acquisition (not the fencing token: ``fence``).
    token: str
    #: When the lock was taken (RFC 3339, UTC).
    started_at: str
    #: The holder process's start time in the system's units (a reused
    #: pid has another).
    proc_start: int
    #: The holder's pid namespace (Linux: the inode of /proc/self/ns/pid);
    #: a pid of another namespace means nothing here.
    pid_ns: int
    #: The holder's machine boot (Linux: /proc/sys/kernel/random/boot_id);
    #: a pid of another boot means nothing now.
    boot_id: str
    #: The holder's command line.
    command: List[str]
    #: The fencing token of this acquisition (0 for shared holds).
    fence: int
    #: A shared (reader) hold.
    shared: bool
    #: The holder that wrote the record has let go.
    released: bool
    #: The protocol that wrote the record: "flock", "dir", "etcd", "postgres".
    protocol: str
    #: Fields the caller added to the record.
    fields: Dict[str, str]
