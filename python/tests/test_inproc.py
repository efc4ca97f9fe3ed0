"""Kernel locks taken in this process with the agent's recipe (_inproc):
they exclude every other holder (hold run, Go, other Python processes)
and are excluded by them, keep the tokens increasing, never lock a lock
file replaced since the recipe was made, stay the parent's across fork(),
are named by hold status, and get their record after a long hold."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import unittest

from helpers import HANG, TempDirTest, hold, hold_binary

from hold import _inproc


def _in_process(lk: "hold.Lock") -> bool:
    return lk._held is not None


def _warm(t: str) -> None:
    """Takes and releases t's lock through the agent until its reply
    carries a recipe (the agent's first exclusive hold writes its record
    at once, and so gives none): the next lock(t) is taken here."""
    for _ in range(3):
        lk = hold.lock(t)
        here = _in_process(lk)
        lk.release()
        if here:
            return
    key = _inproc.key("acquire", {"target": t})
    if key not in _inproc.recipes:
        raise AssertionError("the agent gave no recipe for a plain kernel lock")


_COUNTER = """
import sys, hold
target, counter, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
here = 0
for _ in range(n):
    with hold.lock(target) as lk:
        here += lk._held is not None
        with open(counter) as f:
            v = int(f.read() or 0)
        with open(counter, "w") as f:
            f.write(str(v + 1))
print(here)
"""


@unittest.skipUnless(sys.platform.startswith("linux"), "the agent gives recipes on Linux only")
class InProcessTest(TempDirTest):
    def setUp(self) -> None:
        super().setUp()
        if not _inproc.enabled or not hold._agent.get_agent().lazy:
            self.skipTest("in-process locks are off (HOLD_INPROC=0, or no synchronous channel)")

    def test_excludes_and_is_excluded_by_every_holder(self) -> None:
        # Interleaved read-modify-writes of one counter by two Python
        # processes (mostly in-process holds) and hold run: no update lost.
        t, c = self.path("data"), self.path("counter")
        with open(c, "w") as f:
            f.write("0")
        n, runs = 300, 40
        ps = [self.python(_COUNTER, t, c, str(n)) for _ in range(2)]
        script = 'read v < "$1"; echo $((v + 1)) > "$1"'
        for _ in range(runs):
            subprocess.run(self.hold_cmd("run", t, "--", "sh", "-c", script, "sh", c), check=True, timeout=HANG)
        here = [int(self.finish(p)) for p in ps]
        with open(c) as f:
            self.assertEqual(int(f.read()), 2 * n + runs)
        self.assertGreater(sum(here), 0, "no lock was taken in-process")

    def _hold_run_holding(self, t: str) -> "subprocess.Popen[str]":
        """A `hold run t` whose command holds t until a line on its stdin."""
        p = subprocess.Popen(self.hold_cmd("run", t, "--", "sh", "-c", "echo held; read x"),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert p.stdout is not None and p.stdin is not None
        self.assertEqual(p.stdout.readline().strip(), "held")
        return p

    def test_go_holder_excludes_an_in_process_try(self) -> None:
        t = self.path("data")
        _warm(t)
        p = self._hold_run_holding(t)
        with self.assertRaises(hold.Busy):
            hold.try_lock(t)
        p.communicate("\n", timeout=HANG)
        with hold.lock(t, timeout=HANG):
            pass

    def test_in_process_holder_excludes_hold_run_and_is_named(self) -> None:
        t = self.path("data")
        _warm(t)
        with hold.lock(t) as lk:
            self.assertTrue(_in_process(lk))
            r = subprocess.run(self.hold_cmd("run", "-n", t, "--", "true"), capture_output=True, text=True, timeout=HANG)
            self.assertNotEqual(r.returncode, 0, "hold run took a lock held in this process")
            st = hold.status(t)
            self.assertEqual(st["state"], "held exclusive")
            self.assertIn(os.getpid(), st.get("kernel_pids", []))
            self.assertGreater(lk.token, 0)
            self.assertEqual(lk.owner["pid"], os.getpid())
            self.assertEqual(hold.status(t)["holder"]["pid"], os.getpid())
        hold.try_lock(t).release()

    def test_tokens_increase_across_mixed_holders(self) -> None:
        t = self.path("data")
        tokens = []
        for i in range(12):
            if i % 3 == 2:
                r = subprocess.run(self.hold_cmd("run", t, "--", "sh", "-c", 'echo "$HOLD_TOKEN"'),
                                   capture_output=True, text=True, timeout=HANG, check=True)
                tokens.append(int(r.stdout))
                continue
            _warm(t)
            with hold.lock(t) as lk:
                tokens.append(lk.token)
        self.assertEqual(tokens, sorted(set(tokens)), f"tokens not strictly increasing: {tokens}")
        self.assertGreater(tokens[0], 0)

    def test_replaced_lock_file_is_never_locked_stale(self) -> None:
        t = self.path("data")
        _warm(t)
        lock_file = t + ".lock"
        shutil.copy(lock_file, lock_file + ".new")
        os.replace(lock_file + ".new", lock_file)  # same content, another inode
        p = self._hold_run_holding(t)
        with self.assertRaises(hold.Busy):
            hold.try_lock(t)
        p.communicate("", timeout=HANG)

    def test_lock_file_written_since_the_recipe_is_judged_again(self) -> None:
        # Data written into the lock file since the recipe was made: the
        # agent judges it, and refuses it as another tool's file.
        t = self.path("data")
        _warm(t)
        with open(t + ".lock", "w") as f:
            f.write("# a data file, not a lock\n" * 10)
        with self.assertRaises(hold.Foreign):
            hold.lock(t)

    def test_replaced_while_held_is_lost(self) -> None:
        t = self.path("data")
        _warm(t)
        lk = hold.lock(t)
        self.assertTrue(_in_process(lk))
        lk.check()
        self.assertIsNone(lk.lost)
        os.remove(t + ".lock")
        with self.assertRaises(hold.Lost) as cm:
            lk.check()
        self.assertEqual(cm.exception.code, "ELOST")
        self.assertIs(lk.lost, cm.exception)
        with self.assertRaises(hold.Lost):
            lk.release()

    def _free_for_others(self, t: str) -> None:
        r = subprocess.run(self.hold_cmd("run", "-n", t, "--", "true"), capture_output=True, text=True, timeout=HANG)
        self.assertEqual(r.returncode, 0, f"the lock is not free after its descriptor was closed: {r.stderr}")

    def test_descriptor_closed_by_the_program_is_lost(self) -> None:
        # The program closes the hold's descriptor (a double close
        # elsewhere): the kernel lets the lock go, and check(), lost and
        # release() say so, as they do for a lock the agent holds.
        t = self.path("data")
        _warm(t)
        lk = hold.lock(t)
        self.assertTrue(_in_process(lk))
        lk.check()
        self.assertIsNone(lk.lost)
        os.close(lk._held.fd)
        self._free_for_others(t)
        with self.assertRaises(hold.Lost) as cm:
            lk.check()
        self.assertEqual(cm.exception.code, "ELOST")
        self.assertIn("closed by the program", str(cm.exception))
        self.assertIs(lk.lost, cm.exception)
        with self.assertRaises(hold.Lost):
            lk.release()
        # This thread holds nothing: taking the lock again is no deadlock.
        with hold.lock(t, timeout=HANG):
            pass

    def test_descriptor_closed_and_its_number_reused_is_lost(self) -> None:
        # Closed, and its number given to another file the program
        # opened: lost (read through lost first), and release() leaves
        # the program's file open.
        t = self.path("data")
        _warm(t)
        lk = hold.lock(t)
        self.assertTrue(_in_process(lk))
        fd = lk._held.fd
        os.close(fd)
        other = os.open(self.path("other"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if other != fd:
                self.skipTest(f"the number {fd} was not reused (got {other})")
            self._free_for_others(t)
            lost = lk.lost
            self.assertIsInstance(lost, hold.Lost)
            self.assertIn("another file", str(lost))
            with self.assertRaises(hold.Lost):
                lk.check()
            with self.assertRaises(hold.Lost):
                lk.release()
            os.fstat(other)  # still open: release() did not close it
            os.write(other, b"still mine")
        finally:
            os.close(other)

    def test_descriptor_closed_then_released_is_lost(self) -> None:
        # No check() before the release: release() itself says it.
        t = self.path("data")
        _warm(t)
        lk = hold.lock(t)
        self.assertTrue(_in_process(lk))
        os.close(lk._held.fd)
        with self.assertRaises(hold.Lost) as cm:
            lk.release()
        self.assertIn("closed by the program", str(cm.exception))
        self.assertIs(lk.lost, cm.exception)

    def test_same_thread_second_lock_is_a_deadlock(self) -> None:
        t = self.path("data")
        _warm(t)
        with hold.lock(t) as lk:
            self.assertTrue(_in_process(lk))
            with self.assertRaises(hold.Deadlock):
                hold.lock(t)
            with self.assertRaises(hold.Deadlock):
                hold.lock(t, timeout=HANG)

    def test_record_appears_after_a_long_hold(self) -> None:
        t = self.path("data")
        _warm(t)
        with hold.lock(t) as lk:
            self.assertTrue(_in_process(lk))
            deadline = time.monotonic() + HANG
            while True:
                holder = hold.status(t).get("holder") or {}
                if holder.get("pid") == os.getpid():
                    break
                if time.monotonic() > deadline:
                    self.fail(f"no record names this process: {hold.status(t)}")
                time.sleep(0.02)
            self.assertGreater(lk.token, 0)
            self.assertEqual(holder.get("token"), None)  # status shows the token apart
        st = hold.status(t)
        self.assertEqual(st["state"], "free")
        self.assertNotIn("command", st.get("holder") or {})

    @unittest.skipUnless(hasattr(os, "fork"), "no fork() here")
    def test_child_of_a_killed_holder_does_not_keep_its_lock(self) -> None:
        # A holder forks a child that lives on, and is killed: the lock
        # goes with it, as an agent's hold would, since the child closed
        # the descriptor it inherited (the at-fork hook).
        t = self.path("data")
        p = self.python(
            """
            import os, sys, time, hold
            t = sys.argv[1]
            for _ in range(3):
                hold.lock(t).release()
            lk = hold.lock(t)
            assert lk._held is not None, "not taken in-process"
            child = os.fork()
            if child == 0:
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                time.sleep(120)
                os._exit(0)
            print(child, flush=True)
            time.sleep(120)
            """,
            t,
        )
        assert p.stdout is not None
        child = int(p.stdout.readline())
        try:
            self.assertNotEqual(subprocess.run(self.hold_cmd("run", "-n", t, "--", "true"), timeout=HANG).returncode, 0)
            p.kill()
            p.communicate(timeout=HANG)  # the child left the pipes
            r = subprocess.run(self.hold_cmd("run", "-w", "20", t, "--", "true"), capture_output=True, text=True, timeout=HANG)
            self.assertEqual(r.returncode, 0, r.stderr)
        finally:
            os.kill(child, 9)

    @unittest.skipUnless(hasattr(os, "fork"), "no fork() here")
    def test_fork_while_holding_leaves_the_lock_to_the_parent(self) -> None:
        t = self.path("data")
        _warm(t)
        lk = hold.lock(t)
        self.assertTrue(_in_process(lk))
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: keeps running while the parent lets go
            try:
                os.close(w)
                os.read(r, 1)
            finally:
                os._exit(0)
        os.close(r)
        try:
            lk.release()
            # The child still runs: had it kept the descriptor, the lock
            # would still be held.
            other = subprocess.run(self.hold_cmd("run", "-n", t, "--", "true"), capture_output=True, text=True, timeout=HANG)
            self.assertEqual(other.returncode, 0, other.stderr)
        finally:
            os.close(w)
            os.waitpid(pid, 0)


if __name__ == "__main__":
    unittest.main()
