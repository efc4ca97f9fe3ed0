"""Releases written ahead of their replies (the synchronous channel's
pipeline): the next holder gets the lock at once, and a release that
failed is never lost: the next call raises it, or the process's exit warns
of it."""

from __future__ import annotations

import shutil
import subprocess

from helpers import HANG, TempDirTest, hold


def _lose(lk: "hold.Lock") -> None:
    """Makes the agent find lk, a portable lock, lost at its release: its
    lock directory goes."""
    shutil.rmtree(lk.path)


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
        l = hold.lock(t, protocol="dir")
        _lose(l)
        try:
            l.release()  # written ahead: its outcome comes with the next reply
        except hold.Lost as e:  # on the standard channel the reply is awaited
            err = e
        else:
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
        l = hold.lock(t, protocol="dir")
        _lose(l)
        with self.assertRaises(hold.Lost):
            l.release()
            hold.status(self.path("other"))  # a round trip on the standard channel
        self.assertEqual(hold.status(self.path("other"))["state"], "free")

    def test_failed_release_is_warned_of_at_exit(self) -> None:
        p = self.python(
            """
            import shutil, sys, hold
            l = hold.lock(sys.argv[1], protocol="dir")
            shutil.rmtree(l.path)
            try:
                l.release()
            except hold.Lost as e:
                print("raised:", e)
            """,
            self.path("data"),
        )
        out, err = p.communicate(timeout=HANG)
        self.assertEqual(p.returncode, 0, err)
        told = out + err
        self.assertIn(self.path("data.lock"), told)
        if "raised:" not in out:
            self.assertIn("HoldWarning", err)

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
