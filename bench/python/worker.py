"""A bench worker in Python: hold's Python package against filelock, on the
same work as the Go workers (see main.go's workerMain; this speaks the same
protocol).

    python3 worker.py MODE DIR M BUDGET_MS

MODE "filelock": py-filelock's FileLock on DIR/target.lock with its default
settings (a busy lock is tried again every 50 ms), made once and acquired
and released per cycle, the way a program keeps one lock object.
MODE "hold": this repository's Python package (its source in $HOLD_PY, its
agent in $HOLD_BIN): hold.lock(DIR/target) and release(), a kernel lock held
by the process's hold agent.
MODE "hold.filelock": the filelock mode's code with its import switched to
the package's drop-in, hold.filelock: the same lock file, through the agent.

It writes "r" when warmed up, starts when stdin closes, takes the lock M
times or until BUDGET_MS is spent, and writes its report to stdout as
little-endian int64s: cycles, start, end, count, then count quadruples
(wait, hold, got, releasing) in nanoseconds; start, end, got and releasing
are Unix times.
"""

import os
import struct
import sys
import time

mode, run_dir, m, budget_ms = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
target = os.path.join(run_dir, "target")
counter = os.open(os.path.join(run_dir, "counter"), os.O_RDWR)
WIDTH = 21
now = time.time_ns


def critical_section():
    buf = os.pread(counter, WIDTH, 0)
    n = int(buf[: WIDTH - 1])
    os.pwrite(counter, b"%020d\n" % (n + 1), 0)


if mode in ("filelock", "hold.filelock"):
    if mode == "filelock":
        import filelock
    else:
        sys.path.insert(0, os.environ["HOLD_PY"])
        import hold.filelock as filelock

    fl = filelock.FileLock(target + ".lock")

    def cycle():
        start = now()
        fl.acquire()
        got = now()
        critical_section()
        releasing = now()
        fl.release()
        return start, got, releasing, now()

elif mode == "hold":
    sys.path.insert(0, os.environ["HOLD_PY"])
    import hold

    def cycle():
        start = now()
        lk = hold.lock(target)
        got = now()
        critical_section()
        releasing = now()
        lk.release()
        return start, got, releasing, now()

else:
    sys.exit(f"unknown mode {mode}")

cycles = 1
cycle()  # warm-up, as the Go workers do
os.write(1, b"r")
sys.stdin.buffer.read()
def agent_cpu():
    """CPU seconds the hold agent of this process has used (0 for filelock)."""
    if mode == "filelock":
        return 0.0
    try:
        from hold import _agent

        with open("/proc/%d/stat" % _agent.get_agent().proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


deadline = time.monotonic() + budget_ms / 1000
cpu0, agent0 = sum(os.times()[:2]), agent_cpu()
samples = []
first = last = 0
for i in range(m):
    if i and time.monotonic() >= deadline:
        break
    start, got, releasing, done = cycle()
    cycles += 1
    if i == 0:
        first = start
    last = done
    samples += (got - start, done - got, got, releasing)
# The CPU the measured cycles used, this process's and its agent's, in ns,
# for the suite's table (on stderr, which it reads after the samples).
sys.stderr.write("cpu %d %d\n" % ((sum(os.times()[:2]) - cpu0) * 1e9, (agent_cpu() - agent0) * 1e9))
out = struct.pack("<%dq" % (4 + len(samples)), cycles, first, last, len(samples) // 4, *samples)
view = memoryview(out)
while view:
    view = view[os.write(1, view):]
