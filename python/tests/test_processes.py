"""Many processes on one lock: exact counters, exclusion with hold run and
Python's filelock, a killed holder, fork()."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import unittest

from helpers import HANG, TempDirTest, hold, hold_binary

# A worker that increments the counter in file "counter" M times, each
# time under lock() or with update(), as argv says.
INCREMENTER = """
import sys, hold
mode, m = sys.argv[1], int(sys.argv[2])
for _ in range(m):
    if mode == "update":
        hold.update("counter", lambda old: str(int(old or "0") + 1))
    else:
        with hold.lock("counter", fair=(mode == "fair")):
            with open("counter") as f:
                n = int(f.read() or "0")
            with open("counter", "w") as f:
                f.write(str(n + 1))
"""


class CounterTest(TempDirTest):
    def count(self, mode: str, n: int = 4, m: int = 40) -> None:
        with open(self.path("counter"), "w") as f:
            f.write("0")
        workers = [self.python(INCREMENTER, mode, str(m)) for _ in range(n)]
        for p in workers:
            self.finish(p)
        with open(self.path("counter")) as f:
            self.assertEqual(int(f.read()), n * m)

    def test_lock(self) -> None:
        self.count("lock")

    def test_fair(self) -> None:
        self.count("fair")

    def test_update(self) -> None:
        self.count("update")


# How a worker waits for the test's "go": it also stops once the scratch
# directory, its working directory, has been removed (the test is over,
# and "go" can never appear) and after a minute, so that a test that
# failed, or was killed, leaves nothing running.
WAIT_FOR_GO = """
def wait_for_go():
    import os, time
    deadline = time.monotonic() + 60
    while not os.path.exists("go") and os.stat(".").st_nlink > 0 and time.monotonic() < deadline:
        time.sleep(0.01)
"""

# Holds the lock of "T" until the file "go" appears, having written
# "ready".
PY_HOLDER = WAIT_FOR_GO + """
import os, sys, time, hold
kw = {"lock_file": "T.lock"} if sys.argv[1:] == ["lock_file"] else {}
with hold.lock(None if kw else "T", **kw):
    open("ready", "w").write(str(os.getpid()))
    wait_for_go()
"""


class InteropTest(TempDirTest):
    def test_hold_run_and_python_exclude_each_other(self) -> None:
        # Python holds T: hold run on T is busy, and names the holder.
        p = self.python(PY_HOLDER)
        pid = self.wait_for_file("ready")
        r = subprocess.run(self.hold_cmd("run", "--verbose", "-n", "T", "--", "true"), cwd=self.dir,
                           capture_output=True, text=True, timeout=HANG)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(f"python pid {pid}", r.stderr)
        open(self.path("go"), "w").close()
        self.finish(p)
        # hold run holds T: Python is busy, and sees hold run as the holder.
        os.remove(self.path("go"))
        os.remove(self.path("ready"))
        h = subprocess.Popen(
            self.hold_cmd("run", "T", "--", "sh", "-c", "echo x > ready; while [ ! -e go ]; do sleep 0.01; done"),
            cwd=self.dir,
        )
        self.wait_for_file("ready")
        with self.assertRaises(hold.Busy) as cm:
            hold.try_lock(self.path("T"))
        self.assertEqual(cm.exception.pid, h.pid)
        open(self.path("go"), "w").close()
        self.assertEqual(h.wait(timeout=HANG), 0)
        hold.try_lock(self.path("T")).release()

    def test_filelock_and_hold_exclude_each_other(self) -> None:
        try:
            import filelock
        except ImportError:
            self.skipTest("Python's filelock is not installed (Debian package python3-filelock)")
        lf = self.path("T.lock")
        # hold (through its agent) holds T.lock: filelock times out.
        with hold.lock(self.path("T")):
            with self.assertRaises(filelock.Timeout):
                filelock.FileLock(lf, timeout=0).acquire()
        # hold's release is in its agent's input: a call of hold's confirms
        # it before filelock, which does not go through the agent, looks.
        self.assertEqual(hold.status(self.path("T"))["state"], "free")
        fl = filelock.FileLock(lf, timeout=0)
        fl.acquire()
        fl.release()
        # filelock holds T.lock: hold is busy, on the target and on the lock file.
        with filelock.FileLock(lf):
            with self.assertRaises(hold.Busy):
                hold.try_lock(self.path("T"))
            with self.assertRaises(hold.Busy):
                hold.try_lock(lock_file=lf)
        with hold.lock(lock_file=lf, timeout=0):
            pass

    def test_node_and_python_exclude_each_other(self) -> None:
        """Node's package (in the source tree only) against this one."""
        js = os.path.join(os.path.dirname(__file__), "..", "..", "js", "index.js")
        node = subprocess.run(["sh", "-c", "command -v node"], capture_output=True, text=True).stdout.strip()
        if not node or not os.path.exists(js):
            self.skipTest("node or the Node package (js/, in the source tree) not found")
        script = (
            "const hold = await import(process.argv[1]);"
            "try { await hold.tryLock('T'); console.log('got'); }"
            "catch (e) { console.log(e.code, e.holder && e.holder.pid); }"
        )
        env = dict(os.environ, HOLD_BIN=hold_binary())
        with hold.lock(self.path("T")) as l:
            pid = l.owner["pid"]
            r = subprocess.run([node, "--input-type=module", "-e", script, os.path.abspath(js)],
                               cwd=self.dir, env=env, capture_output=True, text=True, timeout=HANG)
        self.assertEqual(r.stdout.split(), ["EBUSY", str(pid)], r.stderr)


class CrashTest(TempDirTest):
    def killed_holder(self, protocol: str) -> None:
        p = self.python(PY_HOLDER.replace('hold.lock(None if kw else "T", **kw)',
                                          f'hold.lock("T", protocol="{protocol}")'))
        self.wait_for_file("ready")
        with self.assertRaises(hold.Busy):
            hold.try_lock(self.path("T"), protocol=protocol)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=HANG)
        p.communicate()
        # The agent saw its input end and released: no staleness period
        # (a portable lock of a dead process is otherwise waited out).
        with hold.lock(self.path("T"), protocol=protocol, timeout=HANG) as l:
            self.assertEqual(l.protocol, protocol)
        st = hold.status(self.path("T"), protocol=protocol)
        self.assertEqual(st["state"], "free")

    def test_kernel_lock(self) -> None:
        self.killed_holder("flock")

    def test_portable_lock(self) -> None:
        self.killed_holder("dir")


class InterruptTest(TempDirTest):
    def test_ctrl_c_cancels_the_wait(self) -> None:
        """A KeyboardInterrupt in lock() cancels the agent's wait: the
        interrupted process does not keep the lock when it is freed. (Its
        abandoned kernel wait may be granted and drop the lock at once, so
        the lock is waited for, not tried.)"""
        t = self.path("T")
        holder = hold.lock(t)
        p = self.python(WAIT_FOR_GO + """
import os, time, hold
open("ready", "w").write("x")
try:
    hold.lock("T")
    print("got it")
except KeyboardInterrupt:
    hold.status("T")  # after the cancel, on the agent's input
    open("interrupted", "w").write("x")
wait_for_go()
""")
        self.wait_for_file("ready")
        time.sleep(0.3)  # let it reach the wait (if not, the test proves less, not wrong)
        p.send_signal(signal.SIGINT)
        self.wait_for_file("interrupted")
        holder.release()
        try:
            hold.lock(t, timeout=10).release()
        finally:
            open(self.path("go"), "w").close()
            out = self.finish(p)
        self.assertNotIn("got it", out)


@unittest.skipUnless(hasattr(os, "fork"), "no fork() here")
class ForkTest(TempDirTest):
    def test_child_has_its_own_agent(self) -> None:
        t = self.path("T")
        l = hold.lock(t)
        parent_agent = l.owner["pid"]
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report, never raise out of here
            code = 1
            try:
                os.close(r)
                try:
                    hold.try_lock(t)
                    msg = "got the parent's lock"
                except hold.Busy as e:
                    msg = f"busy {e.pid}"
                l.release()  # the parent's: does nothing here
                with hold.lock(t + "2") as l2:
                    msg += f" own {l2.owner['pid']}"
                os.write(w, msg.encode())
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        with os.fdopen(r) as f:
            msg = f.read()
        _, st = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(st), 0, msg)
        words = msg.split()
        self.assertEqual(words[:2], ["busy", str(parent_agent)], msg)
        self.assertNotEqual(words[3], str(parent_agent))
        l.check()  # still the parent's, after the child's release and exit
        l.release()

    def test_parent_exit_frees_its_locks_while_child_lives(self) -> None:
        """The child must not keep the parent's agent's input open: when the
        parent exits, its locks go at once, whatever the child does.

        The child outlives the worker that forked it, so it is no child of
        this process: the test waits for it to exit before it ends (and
        removes the directory the child polls in)."""
        self.addCleanup(lambda: open(self.path("go"), "w").close())
        p = self.python(WAIT_FOR_GO + """
import os, hold
l = hold.lock("T")
child = os.fork()
if child == 0:
    # Not the test's pipes: it waits for their end.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)
    os.dup2(null, 2)
    wait_for_go()
    os._exit(0)
open("ready", "w").write(str(child))
""")
        self.finish(p)
        child = int(self.wait_for_file("ready"))
        try:
            with hold.lock(self.path("T"), timeout=HANG):
                pass
        finally:
            open(self.path("go"), "w").close()
            deadline = time.monotonic() + HANG
            while time.monotonic() < deadline:
                if not _runs(child):
                    break
                time.sleep(0.01)
            else:
                self.fail(f"the forked child {child} did not exit after go")


def _runs(pid: int) -> bool:
    """Whether pid still runs: exists, and (where /proc says) is not a
    zombie that its new parent has not reaped yet."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return not os.path.isdir("/proc/self")
    except OSError:
        return True


if __name__ == "__main__":
    unittest.main()
