"""README.md's "change the import" example: both blocks run (the one on
filelock, the one on hold.filelock), print the same, and differ only in
the import."""

from __future__ import annotations

import os
import re
import unittest
from typing import List

from helpers import TempDirTest

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")


def switching_blocks() -> List[str]:
    with open(README, encoding="utf-8") as f:
        text = f.read()
    start = text.index("### Switching from filelock: change the import")
    end = text.index("\n## ", start)
    return re.findall(r"```python\n(.*?)```", text[start:end], re.S)


class ReadmeSwitchTest(TempDirTest):
    def run_block(self, code: str) -> str:
        return self.finish(self.python(code))

    def test_before_and_after(self) -> None:
        blocks = switching_blocks()
        self.assertEqual(len(blocks), 2, "the section has a before and an after block")
        before, after = (b.splitlines() for b in blocks)
        self.assertEqual(before[0], "from filelock import FileLock, Timeout")
        self.assertEqual(after[0], "from hold.filelock import FileLock, Timeout")
        self.assertEqual(before[1:], after[1:], "only the import differs")
        want = "Another instance of this application currently holds the lock.\n"
        self.assertEqual(self.run_block(blocks[1]), want)
        with open(self.path("high_ground.txt")) as f:
            self.assertEqual(f.read(), "You were the chosen one.")
        try:
            import filelock  # noqa: F401
        except ImportError:
            if os.environ.get("HOLD_TEST_NOSKIP"):
                self.fail("the filelock module is not installed (Debian package python3-filelock)")
            self.skipTest("the filelock module is not installed (Debian package python3-filelock)")
        self.assertEqual(self.run_block(blocks[0]), want)


if __name__ == "__main__":
    unittest.main()
