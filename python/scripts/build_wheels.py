#!/usr/bin/python3
"""Builds the Python package's release artifacts from hold executables.

    build_wheels.py --version SEMVER --out DIR [--binary GOOS_GOARCH=PATH[,PATH...] ...]

Makes, in DIR:
  - the sdist and the pure py3-none-any wheel, which run the hold they find
    through HOLD_BIN or on PATH;
  - one platform wheel per --binary, carrying the executables named (hold,
    and hold-remote for etcd targets if given) in hold/_bin, tagged for
    the platform: a static Linux binary runs on glibc and musl alike, so
    its wheel is tagged manylinux2014 and musllinux both.

GOOS_GOARCH may carry GoReleaser's suffixes (linux_amd64_v1). FreeBSD has
no wheel platform tag the Python package index takes, so FreeBSD binaries
are skipped, with a message.

It uses setuptools, wheel and build as Debian packages them (python3-setuptools,
python3-wheel, python3-build), without isolation and without network; run it
with Debian's /usr/bin/python3.

The version is a semantic version (GoReleaser's, e.g. 0.1.0 or
0.1.0-SNAPSHOT-abc1234), turned into a PEP 440 one (0.1.0.dev0+snapshot.abc1234).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
REPO = os.path.dirname(PYTHON_DIR)

# Wheel platform tags per GOOS_GOARCH. The binaries are static (no cgo),
# so one Linux wheel serves glibc (manylinux2014) and musl (musllinux_1_1)
# systems. Go 1.25 and later need macOS 12.
PLATFORMS: Dict[str, str] = {
    "linux_amd64": "manylinux2014_x86_64.musllinux_1_1_x86_64",
    "linux_arm64": "manylinux2014_aarch64.musllinux_1_1_aarch64",
    "darwin_amd64": "macosx_12_0_x86_64",
    "darwin_arm64": "macosx_12_0_arm64",
    "windows_amd64": "win_amd64",
    "windows_arm64": "win_arm64",
}

# PEP 440's version pattern (its appendix), to check what pep440() makes.
PEP440 = re.compile(
    r"""^v?(?:(?:[0-9]+!)?[0-9]+(?:\.[0-9]+)*
    (?:[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview)[-_.]?[0-9]*)?
    (?:-[0-9]+|[-_.]?(?:post|rev|r)[-_.]?[0-9]*)?
    (?:[-_.]?dev[-_.]?[0-9]*)?)
    (?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?$""",
    re.VERBOSE | re.IGNORECASE,
)

SEMVER = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+([0-9A-Za-z.-]+))?$")


def pep440(semver: str) -> str:
    """Turns a semantic version into a PEP 440 one: 1.2.3 stays, a
    pre-release alpha.N / beta.N / rc.N becomes aN / bN / rcN, any other
    pre-release (a snapshot) a development release with the rest as a local
    label, and build metadata a local label."""
    m = SEMVER.match(semver.strip())
    if not m:
        raise SystemExit(f"build_wheels: {semver!r} is not a semantic version (MAJOR.MINOR.PATCH[-PRE][+BUILD])")
    major, minor, patch, pre, build = m.groups()
    version = f"{int(major)}.{int(minor)}.{int(patch)}"
    local: List[str] = []
    if pre:
        pm = re.match(r"^(alpha|a|beta|b|rc|c)[.-]?(\d*)$", pre, re.IGNORECASE)
        if pm:
            kind = {"alpha": "a", "a": "a", "beta": "b", "b": "b", "rc": "rc", "c": "rc"}[pm.group(1).lower()]
            version += f"{kind}{int(pm.group(2) or 0)}"
        else:
            version += ".dev0"
            local.append(pre)
    if build:
        local.append(build)
    if local:
        label = re.sub(r"[^a-z0-9]+", ".", ".".join(local).lower()).strip(".")
        if label:
            version += "+" + label
    if not PEP440.match(version):
        raise SystemExit(f"build_wheels: made {version!r} of {semver!r}, which is not a PEP 440 version")
    return version


def parse_binary(spec: str) -> Tuple[str, List[str]]:
    if "=" not in spec:
        raise SystemExit(f"build_wheels: --binary {spec!r}: want GOOS_GOARCH=PATH[,PATH...]")
    platform, paths = spec.split("=", 1)
    parts = platform.strip().lower().split("_")
    if len(parts) < 2:
        raise SystemExit(f"build_wheels: --binary {spec!r}: {platform!r} is not GOOS_GOARCH")
    files = [p for p in paths.split(",") if p]
    for f in files:
        if not os.path.isfile(f):
            raise SystemExit(f"build_wheels: --binary {spec!r}: {f} is not a file")
    exe = "hold.exe" if parts[0] == "windows" else "hold"
    if exe not in [os.path.basename(f) for f in files]:
        raise SystemExit(f"build_wheels: --binary {spec!r}: no {exe} among the files")
    return f"{parts[0]}_{parts[1]}", files


def stage(version: str, binaries: Optional[List[str]]) -> str:
    """Copies the package's tree to a scratch directory, with the version
    written in and the executables in src/hold/_bin."""
    tmp = tempfile.mkdtemp(prefix="hold-wheel-")
    tree = os.path.join(tmp, "python")
    shutil.copytree(
        PYTHON_DIR,
        tree,
        ignore=shutil.ignore_patterns(
            "__pycache__", "*.pyc", "build", "dist", "*.egg-info", "_bin", ".mypy_cache",
            ".venv-filelock",  # the test environment .ci/run makes (PIP_PACKAGES)
        ),
    )
    with open(os.path.join(tree, "src", "hold", "_version.py"), "w") as f:
        f.write(f'"""The package\'s version, written by the release build."""\n\n__version__ = "{version}"\n')
    licence = os.path.join(REPO, "LICENSE")
    if os.path.isfile(licence):
        shutil.copy(licence, tree)
    if binaries:
        bindir = os.path.join(tree, "src", "hold", "_bin")
        os.makedirs(bindir)
        for b in binaries:
            dst = os.path.join(bindir, os.path.basename(b))
            shutil.copyfile(b, dst)
            os.chmod(dst, 0o755)
    return tree


def build(tree: str, out: str, what: List[str], platform: str = "") -> None:
    env = dict(os.environ)
    env.pop("HOLD_WHEEL_PLATFORM", None)
    if platform:
        env["HOLD_WHEEL_PLATFORM"] = platform
    cmd = [sys.executable, "-m", "build", "--no-isolation", *what, "--outdir", out, tree]
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout)
        raise SystemExit(f"build_wheels: {' '.join(cmd)} failed")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", required=True, help="the release's semantic version, e.g. 0.1.0-SNAPSHOT-abc1234")
    ap.add_argument("--out", required=True, help="directory for the wheels and the sdist")
    ap.add_argument("--binary", action="append", default=[], metavar="GOOS_GOARCH=PATH[,PATH...]",
                    help="executables for one platform wheel (hold, optionally hold-remote); repeatable")
    args = ap.parse_args()
    try:
        import build as _build  # noqa: F401
        import setuptools  # noqa: F401
        import wheel  # noqa: F401
    except ImportError as e:
        raise SystemExit(
            f"build_wheels: {e}: install Debian's python3-setuptools, python3-wheel and python3-build "
            "and run this with /usr/bin/python3"
        )
    version = pep440(args.version)
    specs = [parse_binary(b) for b in args.binary]
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    made: List[str] = []
    scratch: List[str] = []
    try:
        before = set(os.listdir(out))
        tree = stage(version, None)
        scratch.append(os.path.dirname(tree))
        build(tree, out, ["--sdist", "--wheel"])
        for platform, files in specs:
            tag = PLATFORMS.get(platform)
            if tag is None:
                print(f"build_wheels: skipping {platform}: no wheel platform tag for it "
                      "(FreeBSD users install the pure wheel and hold from a release archive)", file=sys.stderr)
                continue
            tree = stage(version, files)
            scratch.append(os.path.dirname(tree))
            build(tree, out, ["--wheel"], tag)
        made = sorted(set(os.listdir(out)) - before)
    finally:
        for d in scratch:
            shutil.rmtree(d, ignore_errors=True)
    for name in made:
        print(os.path.join(args.out, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
