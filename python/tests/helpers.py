"""What the tests share: a scratch directory, Python worker processes, and
the hold executable the package itself would use."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
from typing import List, Optional

import hold
from hold import _agent

# Workers import the same hold package as the tests: from the source tree
# when that is where it came from (an installed one is found anyway).
_parent = os.path.dirname(os.path.dirname(os.path.abspath(hold.__file__)))
if os.path.basename(_parent) not in ("site-packages", "dist-packages"):
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_parent, os.environ.get("PYTHONPATH")) if p)

#: A bound on every wait, only to turn a hang into a failure.
HANG = 60.0


def hold_binary() -> str:
    """The hold executable the package finds (HOLD_BIN, the wheel's, PATH)."""
    return _agent.find_binary()


def need_filelock_feature(test: unittest.TestCase, present: bool, what: str) -> None:
    """Skips test when the installed filelock lacks what it needs (present
    is False): Debian's python3-filelock (3.9) predates filelock's newer
    classes. CI runs these tests with filelock's current release (the
    virtual environment .ci/run makes), and with HOLD_TEST_NOSKIP=1 a
    missing one fails instead."""
    if present:
        return
    why = f"the installed filelock has no {what}: run the tests with filelock's current release (.ci/run installs it)"
    if os.environ.get("HOLD_TEST_NOSKIP") == "1":
        test.fail(why + " (HOLD_TEST_NOSKIP=1: CI runs every test)")
    test.skipTest(why)


class TempDirTest(unittest.TestCase):
    """A test in a scratch directory of its own (also the working directory
    of the workers it starts)."""

    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="hold-py-test-")
        self.addCleanup(shutil.rmtree, self.dir, ignore_errors=True)

    def path(self, *names: str) -> str:
        return os.path.join(self.dir, *names)

    def python(self, code: str, *args: str, stdin: Optional[int] = None) -> "subprocess.Popen[str]":
        """Starts a Python worker running code in the scratch directory,
        with this interpreter and environment (so the same hold package)."""
        return subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code), *args],
            cwd=self.dir,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def finish(self, p: "subprocess.Popen[str]") -> str:
        """Waits for a worker and fails the test if it failed; returns its output."""
        out, err = p.communicate(timeout=HANG)
        self.assertEqual(p.returncode, 0, f"worker failed: {out}\n{err}")
        return out

    def wait_for_file(self, name: str) -> str:
        deadline = time.monotonic() + HANG
        while time.monotonic() < deadline:
            try:
                with open(self.path(name)) as f:
                    data = f.read()
                if data:
                    return data
            except FileNotFoundError:
                pass
            time.sleep(0.01)
        self.fail(f"{name} did not appear")

    def hold_cmd(self, *args: str) -> List[str]:
        return [hold_binary(), *args]


__all__ = ["HANG", "TempDirTest", "hold", "hold_binary", "need_filelock_feature"]
