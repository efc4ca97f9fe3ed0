"""Releases written ahead of their replies (the synchronous channel's
pipeline): the next holder gets the lock at once, and a release that
failed is never lost: the next call raises it, or the process's exit warns
of it."""

from __future__ import annotations

import os
import subprocess
import time

from helpers import HANG, TempDirTest, hold


def _lose(lk: "hold.Lock") -> None:
    """Makes the agent find the kernel lock lk lost at its release, before
    this process has heard of the loss: its lock file goes, the agent
    notices (its watch looks once a second) and says so, and the test
    forgets what it said, as a release that comes before the agent's word
    does not know it."""
    os.remove(lk.path)
    deadline = time.monotonic() + HANG
    while lk.lost is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"the agent did not find {lk.path} lost")
        time.sleep(0.01)
    lk._lost = None


def _ahead() -> bool:
    """Whether this process's kernel locks are released ahead of their
    replies: where it has the synchronous channel."""
    return hold._agent.get_agent().sync is not None


class ReleaseAheadTest(TempDirTest):
    def test_next_holder_gets_the_lock_while_the_releaser_is_idle(self) -> None:
        # The releaser makes no call after release(): the release must be
        # in the agent's input already, not waiting for a next request.
        t = self.path("data")
        p = self.python(
            """
            import sys, hold
            l = hold.lock(sys.argv[1])
            print("held", flush=True)
            sys.stdin.readline()
            l.release()
            print("released", flush=True)
            sys.stdin.readline()  # idle, holding nothing, until told to end
            """,
            t,
            stdin=subprocess.PIPE,
        )
        assert p.stdin is not None and p.stdout is not None
        self.assertEqual(p.stdout.readline().strip(), "held")
        with self.assertRaises(hold.Busy):
            hold.try_lock(t)
        p.stdin.write("\n")
        p.stdin.flush()
        self.assertEqual(p.stdout.readline().strip(), "released")
        with hold.lock(t, timeout=HANG) as l:
            self.assertEqual(hold.status(t)["holder"]["pid"], l.owner["pid"])
        out, err = p.communicate("\n", timeout=HANG)
        self.assertEqual(p.returncode, 0, err)

    def test_failed_release_is_raised_by_the_next_call(self) -> None:
        t, other = self.path("data"), self.path("other")
        l = hold.lock(t)
        _lose(l)
        if not _ahead():  # on the standard channel the reply is awaited
            with self.assertRaises(hold.Lost) as cm:
                l.release()
            err = cm.exception
        else:
            l.release()  # written ahead: its outcome comes with the next reply
            with self.assertRaises(hold.Lost) as cm:
                hold.try_lock(other)
            err = cm.exception
            self.assertIs(l.lost, err)
        self.assertEqual(err.code, "ELOST")
        self.assertIn(l.path, str(err))
        # Raised once, and the call that raised it kept nothing: other is free.
        hold.try_lock(other).release()
        l.release()  # idempotent, as ever

    def test_failed_release_is_raised_before_a_request_of_the_standard_channel(self) -> None:
        t = self.path("data")
        l = hold.lock(t)
        _lose(l)
        with self.assertRaises(hold.Lost):
            l.release()
            hold.status(self.path("other"))  # a round trip on the standard channel
        self.assertEqual(hold.status(self.path("other"))["state"], "free")

    def test_failed_release_is_warned_of_at_exit(self) -> None:
        p = self.python(
            """
            import sys, hold
            sys.path.insert(0, sys.argv[2])
            from test_release_ahead import _lose
            l = hold.lock(sys.argv[1])
            _lose(l)
            try:
                l.release()
            except hold.Lost as e:
                print("raised:", e)
            """,
            self.path("data"),
            os.path.dirname(os.path.abspath(__file__)),
        )
        out, err = p.communicate(timeout=HANG)
        self.assertEqual(p.returncode, 0, err)
        told = out + err
        self.assertIn(self.path("data.lock"), told)
        if "raised:" not in out:
            self.assertIn("HoldWarning", err)

    def test_portable_release_is_waited_for(self) -> None:
        # Its directory goes with the release: gone when release() returns.
        l = hold.lock(self.path("data"), protocol="dir")
        self.assertTrue(os.path.isdir(l.path))
        l.release()
        self.assertFalse(os.path.exists(l.path))

    def test_many_releases_ahead(self) -> None:
        # More locks released in a row than may wait for their replies.
        locks = [hold.lock(self.path(f"l{i}")) for i in range(200)]
        for lk in locks:
            lk.release()
        for i in range(200):
            hold.try_lock(self.path(f"l{i}")).release()


if __name__ == "__main__":
    import unittest

    unittest.main()
