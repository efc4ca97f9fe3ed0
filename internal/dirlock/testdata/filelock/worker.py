"""A worker of the filelock interop tests (filelock_test.go): Python's
filelock, the real package, taking its SoftFileLock.

    worker.py hold PATH            take PATH, print "held", hold it until
                                   stdin closes, release, print "released"
    worker.py count TARGET ITERS   increment the counter TARGET ITERS times
                                   under TARGET.lock, with the O_EXCL marker
                                   and per-process log of the Go workers

filelock cannot wait on hold's lock directory: its SoftFileLock raises
IsADirectoryError at once. The workers retry on that error, as a project
whose processes do not all use hold would have to, unless
FILELOCK_WORKER_NO_RETRY is set: against hold's file form (softfile.go)
filelock must wait by itself, and the error then ends the worker."""

import os
import sys
import time

import filelock


def acquire(lock: filelock.SoftFileLock) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            lock.acquire(timeout=max(0.0, deadline - time.monotonic()), poll_interval=0.005)
            return
        except IsADirectoryError:
            if os.environ.get("FILELOCK_WORKER_NO_RETRY") or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


def critical_section(target: str) -> int:
    marker = target + ".marker"
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        with open(marker) as f:
            other = f.read()
        with open(target + ".violation", "w") as f:
            f.write(f"{os.getpid()} and {other}\n")
        print(f"two holders: pid {other} is inside the section too", file=sys.stderr)
        return 3
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    try:
        with open(target) as f:
            n = int(f.read().strip() or "0")
    except FileNotFoundError:
        n = 0
    with open(target, "w") as f:
        f.write(str(n + 1))
    with open(f"{target}.log.{os.getpid()}", "a") as f:
        f.write(f"{n + 1}\n")
    os.remove(marker)
    return 0


def main() -> int:
    role = sys.argv[1]
    if role == "hold":
        lock = filelock.SoftFileLock(sys.argv[2], timeout=60)
        acquire(lock)
        print("held", flush=True)
        sys.stdin.read()
        lock.release()
        print("released", flush=True)
        return 0
    if role == "count":
        target, iters = sys.argv[2], int(sys.argv[3])
        lock = filelock.SoftFileLock(target + ".lock")
        for _ in range(iters):
            acquire(lock)
            try:
                code = critical_section(target)
            finally:
                lock.release()
            if code:
                return code
        return 0
    print("unknown role", role, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
