"""hold's portable protocol and filelock's own SoftFileLock (a plain file
that names its holder) at one path, with real filelock processes: hold
waits for filelock's holder and takes over a dead one's file, and
hold.filelock's SoftFileLock holds its lock in the same form (a file naming
hold's agent), which filelock waits for and takes over once the agent is
gone. Neither ever holds while the other does."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import time
from types import ModuleType

from helpers import HANG, TempDirTest, hold_binary, need_filelock_feature

import hold.filelock

#: A worker that increments the counter TARGET ITERS times under
#: TARGET.lock, with an O_EXCL marker that catches two holders at once.
_COUNTER = """
import os, sys, time
target, iters, module = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if module == "filelock":
    import filelock as m
else:
    import hold.filelock as m
# Start every worker's loop at once: warm up (hold's agent starts on the
# first lock), say so, and wait for the go file.
with m.SoftFileLock(target + ".warm." + str(os.getpid())):
    pass
open(target + ".ready." + str(os.getpid()), "w").close()
while not os.path.exists(target + ".go"):
    time.sleep(0.001)
lock = m.SoftFileLock(target + ".lock")
for _ in range(iters):
    # No retry: each waits for the other's holder by itself.
    lock.acquire(timeout=60, poll_interval=0.005)
    try:
        fd = os.open(target + ".marker", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        os.close(fd)
        try:
            with open(target) as f:
                n = int(f.read() or "0")
        except FileNotFoundError:
            n = 0
        with open(target, "w") as f:
            f.write(str(n + 1))
        os.remove(target + ".marker")
    finally:
        lock.release()
"""

_HOLDER = """
import sys, filelock
l = filelock.SoftFileLock(sys.argv[1])
l.acquire()
print("held", flush=True)
sys.stdin.read()
l.release()
"""


_HOLD_HOLDER = """
import sys, hold.filelock
l = hold.filelock.SoftFileLock(sys.argv[1])
l.acquire()
with open(sys.argv[1]) as f:
    print("held", f.read().split("\\n")[0], flush=True)
sys.stdin.read()
l.release()
"""


class SoftFileLockInteropTest(TempDirTest):
    def filelock4(self) -> ModuleType:
        try:
            fl = importlib.import_module("filelock")
        except ImportError:
            fl = None
        major = int(str(getattr(fl, "__version__", "0")).split(".")[0]) if fl else 0
        need_filelock_feature(self, major >= 4, "SoftFileLock that records its holder (filelock 4)")
        assert fl is not None
        return fl

    def filelock_holder(self, path: str) -> "subprocess.Popen[str]":
        p = self.python(_HOLDER, path, stdin=subprocess.PIPE)
        assert p.stdout is not None
        line = p.stdout.readline().strip()
        if line != "held":
            p.kill()
            self.fail(f"filelock holder did not start: {line!r} {p.communicate()[1]}")
        self.addCleanup(p.kill)
        return p

    def test_hold_run_waits_for_filelock(self) -> None:
        self.filelock4()
        path = self.path("x.lock")
        p = self.filelock_holder(path)
        run = subprocess.Popen(
            [hold_binary(), "run", "--verbose", "--protocol", "dir", "--lock-file", path, "-w", str(HANG), "--",
             "sh", "-c", "echo got > got"],
            cwd=self.dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.addCleanup(run.kill)
        time.sleep(1.0)
        if run.poll() is not None:
            self.fail(f"hold run did not wait: {run.communicate()}")
        self.assertFalse(os.path.exists(self.path("got")))
        status = subprocess.run(
            [hold_binary(), "status", "--protocol", "dir", "--lock-file", path],
            capture_output=True, text=True, timeout=HANG,
        )
        self.assertIn(f"a filelock soft lock of pid {p.pid}", status.stdout, status)
        out, err = p.communicate("", timeout=HANG)
        self.assertEqual(p.returncode, 0, f"filelock holder: {out}\n{err}")
        out, err = run.communicate(timeout=HANG)
        self.assertEqual(run.returncode, 0, f"{out}\n{err}")
        self.assertTrue(os.path.exists(self.path("got")))

    def test_dead_filelock_holder_is_taken_over(self) -> None:
        self.filelock4()
        path = self.path("x.lock")
        p = self.filelock_holder(path)
        p.send_signal(signal.SIGKILL)
        p.communicate(timeout=HANG)
        lock = hold.filelock.SoftFileLock(path)
        with lock.acquire(timeout=0):
            self.assertTrue(os.path.isfile(path))

    def hold_holder(self, path: str) -> "tuple[subprocess.Popen[str], int]":
        """A process holding path with hold.filelock's SoftFileLock, and
        the pid its lock file names: its agent's."""
        p = self.python(_HOLD_HOLDER, path, stdin=subprocess.PIPE)
        assert p.stdout is not None
        line = p.stdout.readline().split()
        if not line or line[0] != "held":
            p.kill()
            self.fail(f"hold holder did not start: {line!r} {p.communicate()[1]}")
        self.addCleanup(p.kill)
        return p, int(line[1])

    def test_filelock_waits_for_hold(self) -> None:
        fl = self.filelock4()
        path = self.path("x.lock")
        p, agent = self.hold_holder(path)
        with open(path) as f:
            self.assertEqual(f.read().split("\n")[0], str(agent))
        self.assertNotEqual(agent, p.pid)
        # hold status names the holder the file names: the agent, alive.
        status = subprocess.run(
            [hold_binary(), "status", "--protocol", "dir", "--lock-file", path],
            capture_output=True, text=True, timeout=HANG,
        )
        self.assertIn(f"a filelock soft lock of pid {agent}", status.stdout, status)
        # filelock waits (no IsADirectoryError), and gets it after hold.
        with self.assertRaises(fl.Timeout):
            fl.SoftFileLock(path).acquire(timeout=0.3)
        waiter = self.python(_HOLDER, path, stdin=subprocess.PIPE)
        self.addCleanup(waiter.kill)
        time.sleep(1.0)
        if waiter.poll() is not None:
            self.fail(f"filelock did not wait: {waiter.communicate()}")
        p.communicate("", timeout=HANG)
        self.assertEqual(p.returncode, 0)
        assert waiter.stdout is not None
        self.assertEqual(waiter.stdout.readline().strip(), "held")
        waiter.communicate("", timeout=HANG)

    def test_dead_agent_is_taken_over_by_filelock(self) -> None:
        fl = self.filelock4()
        path = self.path("x.lock")
        p, agent = self.hold_holder(path)
        # Alive, it is never taken over.
        with self.assertRaises(fl.Timeout):
            fl.SoftFileLock(path).acquire(timeout=0.3)
        # Its agent killed, the file names a dead process: filelock takes
        # it over at once.
        os.kill(agent, signal.SIGKILL)
        deadline = time.monotonic() + HANG
        while True:
            try:
                os.kill(agent, 0)
            except ProcessLookupError:
                break
            if time.monotonic() > deadline:
                self.fail("the agent did not die")
            time.sleep(0.01)
        if os.path.exists(path):
            with open(path) as f:
                self.assertEqual(f.read().split("\n")[0], str(agent))
        with fl.SoftFileLock(path).acquire(timeout=0):
            pass
        p.kill()
        p.communicate(timeout=HANG)

    def test_counter_shared_with_filelock(self) -> None:
        self.filelock4()
        target = self.path("counter")
        iters = 40
        ps = [self.python(_COUNTER, target, str(iters), m) for m in ("filelock", "hold", "filelock", "hold")]
        deadline = time.monotonic() + HANG
        while len([n for n in os.listdir(self.dir) if n.startswith("counter.ready.")]) < len(ps):
            if time.monotonic() > deadline or any(p.poll() is not None for p in ps):
                self.fail("the workers did not start: " + repr([p.communicate() for p in ps if p.poll() is not None]))
            time.sleep(0.01)
        open(target + ".go", "w").close()
        for p in ps:
            self.finish(p)
        with open(target) as f:
            self.assertEqual(int(f.read()), 4 * iters)
