"""The type hold.Owner, and the decoding of a lock's owner record, against
the records hold writes: lock/testdata/records.json, which a Go test keeps
exactly what the Go codec writes, with every key of its owner record."""

from __future__ import annotations

import json
import os
import unittest
from typing import Any, Dict, List

from helpers import hold
from hold import _agent

_FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lock", "testdata", "records.json")


def _records() -> List[Dict[str, Any]]:
    with open(_FIXTURE, encoding="utf-8") as f:
        fixture = json.load(f)
    return list(fixture["records"]) + [fixture["past"]]


@unittest.skipUnless(os.path.exists(_FIXTURE), "run from the repository: lock/testdata/records.json is not here")
class OwnerTypeTest(unittest.TestCase):
    def test_owner_has_every_key_and_no_other(self) -> None:
        record_keys = {k for r in _records() for k in r}
        type_keys = set(hold.Owner.__annotations__)
        self.assertGreater(len(record_keys), 5)
        self.assertEqual(sorted(record_keys - type_keys), [], "hold.Owner lacks these keys of the records hold writes")
        self.assertEqual(sorted(type_keys - record_keys), [], "hold.Owner has keys that no record in lock/testdata/records.json has")

    def test_lock_reply_keeps_every_key(self) -> None:
        # A lock taken on the synchronous channel decodes its owner record
        # only when it is read (_agent._lock_reply): every record must come
        # out whole.
        for record in _records():
            raw = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()
            line = b'{"id":7,"ok":true,"lock":3,"token":17,"path":"x.lock","protocol":"flock","owner":' + raw + b"}\n"
            reply = _agent._lock_reply(line, 7, len(b'{"id":7,"ok":true,"lock":'))
            self.assertIsNotNone(reply, line)
            assert reply is not None
            lk = hold.Lock(None, reply)  # type: ignore[arg-type]
            self.assertEqual(lk.owner, record)

    def test_lazy_lock_replies_decode_as_json(self) -> None:
        # A lazy lock's reply has no record: what follows its lock number
        # is decoded once per path, and every reply comes out as json
        # decodes it, whatever its id and lock number.
        for path in ("x.lock", '/tmp/a "b".lock', "/tmp/\u00e9.lock"):
            for rid, number in ((7, 3), (8, 3), (123, 4567), (9, 0)):
                line = (b'{"id":%d,"ok":true,"lock":%d,"path":%s,"protocol":"flock","release_ahead":true}\n'
                        % (rid, number, json.dumps(path).encode()))
                start = len(b'{"id":%d,"ok":true,"lock":' % rid)
                self.assertEqual(_agent._lock_reply(line, rid, start), json.loads(line), line)
        # A second "lock" after the first is not taken for what follows it.
        line = b'{"id":5,"ok":true,"lock":1,"path":"y.lock","lock":2}\n'
        for _ in range(2):
            self.assertEqual(_agent._lock_reply(line, 5, len(b'{"id":5,"ok":true,"lock":')), json.loads(line))


if __name__ == "__main__":
    unittest.main()
