#!/usr/bin/env python3
"""Runs filelock's own test suite against hold.filelock, by the plain switch.

    python scripts/run_filelock_suite.py SDIST_DIR [--min-pass-rate 0.95] [-- PYTEST_ARGS...]

SDIST_DIR is filelock's unpacked source distribution (the directory with
``tests/`` and ``pyproject.toml``). The Python running this needs filelock
(the same release: its private helper modules are what the suite's
conftest imports), pytest and the plugins the suite uses (pytest-asyncio,
pytest-mock, pytest-timeout), and finds hold's agent as the package does
(``HOLD_BIN``, or ``hold`` on PATH).

The switch: every Python process of the run (the suite starts children)
first imports filelock as installed, then puts ``hold.filelock`` in its
place, ``sys.modules["filelock"]``, with ``filelock.asyncio`` and
``filelock.version``: every public name the tests use is hold's. filelock's
private modules (``filelock._identity`` ...) stay filelock's, for the
helpers the suite's conftest takes from them; a test that reads or mocks
them tests filelock's internals, not its API.

tests/filelock_suite_skips.txt (beside this package's tests) lists the
tests that cannot apply to a lock held through hold's agent, each with a
reason; they are skipped with it. The run prints the counts: test modules
collected and failing to import, tests passed, failed and skipped by
reason, and the pass rate of the tests not on the list; it exits non-zero
when a module fails to import or the pass rate is below --min-pass-rate.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
SKIPS = os.path.join(PYTHON_DIR, "tests", "filelock_suite_skips.txt")

# Imported first in every process of the run (it is sitecustomize).
SWITCH = '''
import importlib, pkgutil, sys
try:
    import filelock as _real
except ImportError:
    _real = None
if _real is not None and getattr(_real, "__file__", None):
    # filelock's private modules, loaded while the real package is
    # "filelock", so that the suite's helpers can import them after the switch.
    for _m in pkgutil.walk_packages(_real.__path__, "filelock."):
        if _m.name.split(".")[-1].startswith("_") or "._" in _m.name:
            try:
                importlib.import_module(_m.name)
            except Exception:
                pass
import hold.filelock as _hold
import hold.filelock.asyncio as _hold_asyncio
import hold.filelock.version as _hold_version
sys.modules["filelock"] = _hold
sys.modules["filelock.asyncio"] = _hold_asyncio
sys.modules["filelock.version"] = _hold_version
# "import filelock._soft._lease as m" reads the attribute _soft of the
# module that is now filelock: hold's, given filelock's private packages
# (in the processes of this run only).
for _name, _mod in list(sys.modules.items()):
    if _name.startswith("filelock._") and _name.count(".") == 1:
        setattr(_hold, _name.split(".")[1], _mod)
'''

# The plugin that skips the listed tests and counts the outcomes.
PLUGIN = '''
import collections, fnmatch, json, os, re
import pytest

_SKIPS = []
with open(os.environ["HOLD_SUITE_SKIPS"]) as f:
    for line in f:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        pattern, _, reason = line.partition(" ")
        _SKIPS.append((pattern, reason.strip() or "listed"))

_listed = {}
_pid = os.getpid()  # a fork child that escapes a test into pytest must not write the results
_results = {}
_errors = []


def _source(item):
    import inspect
    fn = getattr(item, "function", None)
    try:
        return inspect.getsource(fn) if fn is not None else ""
    except (OSError, TypeError):
        return ""


def _listed_reason(item):
    n = item.nodeid
    src = None
    for pattern, reason in _SKIPS:
        if pattern.startswith("source:"):
            if src is None:
                src = _source(item)
            if re.search(pattern[len("source:"):], src):
                return reason
        # A pattern is fnmatch's, over the node id; a plain module or test
        # id also covers what is under it, a directory ("/" at the end)
        # every module in it.
        elif (fnmatch.fnmatchcase(n, pattern) or fnmatch.fnmatchcase(n.split("::")[0], pattern)
              or n.startswith(pattern + "::") or n.startswith(pattern + "[")
              or (pattern.endswith("/") and n.startswith(pattern))):
            return reason
    return None


def pytest_collection_modifyitems(items):
    for item in items:
        reason = _listed_reason(item)
        if reason is not None:
            _listed[item.nodeid] = reason
            item.add_marker(pytest.mark.skip(reason="hold: " + reason))


def pytest_collectreport(report):
    if report.failed:
        _errors.append(report.nodeid)


def pytest_runtest_logreport(report):
    if report.when == "call" or report.outcome != "passed":
        prev = _results.get(report.nodeid)
        if prev is None or prev[0] == "passed":
            reason = ""
            if report.skipped and isinstance(report.longrepr, tuple):
                reason = report.longrepr[2]
            _results[report.nodeid] = (report.outcome if report.when == "call" or report.skipped else "error", reason)


def pytest_sessionfinish(session):
    if os.getpid() != _pid:
        return
    with open(os.environ["HOLD_SUITE_RESULTS"], "w") as f:
        json.dump({"listed": _listed, "results": _results, "collect_errors": _errors}, f)
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sdist", help="filelock's unpacked source distribution")
    ap.add_argument("--min-pass-rate", type=float, default=0.0,
                    help="fail below this share of passes among the tests not on the skip list (e.g. 0.95)")
    ap.add_argument("--skips", default=SKIPS, help="the skip list (default: %(default)s)")
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args.pytest_args = extra

    sdist = os.path.abspath(args.sdist)
    if not os.path.isdir(os.path.join(sdist, "tests")):
        print(f"run_filelock_suite: {sdist} has no tests/: give the unpacked filelock source distribution",
              file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="hold-filelock-suite-")
    try:
        with open(os.path.join(work, "sitecustomize.py"), "w") as f:
            f.write(SWITCH)
        with open(os.path.join(work, "hold_suite_plugin.py"), "w") as f:
            f.write(PLUGIN)
        results = os.path.join(work, "results.json")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (work, os.path.join(PYTHON_DIR, "src"), env.get("PYTHONPATH")) if p
        )
        env["HOLD_SUITE_SKIPS"] = os.path.abspath(args.skips)
        env["HOLD_SUITE_RESULTS"] = results
        # The suite's own options are in its pyproject.toml; pytest-randomly
        # (its random order) is not installed, and no cache is written into it.
        cmd = [sys.executable, "-m", "pytest", "-p", "hold_suite_plugin", "-p", "no:cacheprovider",
               "-q", "-rN", "--no-header", *args.pytest_args]
        print("run_filelock_suite:", " ".join(cmd), flush=True)
        subprocess.run(cmd, cwd=sdist, env=env)
        return report(results, args.min_pass_rate)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(path: str, min_rate: float) -> int:
    import json

    try:
        with open(path) as f:
            data = json.load(f)
    except OSError:
        print("run_filelock_suite: pytest wrote no results (it did not get to run the tests)", file=sys.stderr)
        return 1
    listed, results, errors = data["listed"], data["results"], data["collect_errors"]
    modules = {nodeid.split("::")[0] for nodeid in results} | set(errors)
    counts = collections.Counter(outcome for outcome, _ in results.values())
    skipped_listed = collections.Counter()
    skipped_suite = collections.Counter()
    for nodeid, (outcome, reason) in results.items():
        if outcome != "skipped":
            continue
        if nodeid in listed:
            skipped_listed[listed[nodeid].split(":")[0]] += 1
        else:
            skipped_suite[reason] += 1
    failed = sorted(n for n, (o, _) in results.items() if o in ("failed", "error"))
    print()
    print(f"run_filelock_suite: test modules: {len(modules)} collected, {len(errors)} failed to import")
    for e in errors:
        print(f"  import failed: {e}")
    for n in failed:
        print(f"  failed: {n}")
    print("run_filelock_suite: skipped by the list (tests/filelock_suite_skips.txt), by reason:")
    for reason, n in skipped_listed.most_common():
        print(f"  {n:5d}  {reason}")
    print("run_filelock_suite: skipped by the suite itself (this platform), by reason:")
    for reason, n in skipped_suite.most_common():
        print(f"  {n:5d}  {reason}")
    ran = counts["passed"] + counts["failed"] + counts["error"]
    rate = counts["passed"] / ran if ran else 0.0
    print(f"run_filelock_suite: pass rate of the tests not on the list: {counts['passed']}/{ran} = {rate:.1%}"
          f" (required: {min_rate:.0%})")
    print(f"{counts['passed']} passed, {counts['failed'] + counts['error']} failed, "
          f"{counts['skipped']} skipped")
    if errors:
        return 1
    return 0 if ran and rate >= min_rate else 1


if __name__ == "__main__":
    sys.exit(main())
