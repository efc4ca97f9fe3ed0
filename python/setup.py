"""Platform wheels. pyproject.toml holds the metadata; this file only
tags a wheel that carries hold executables (in src/hold/_bin, put there by
scripts/build_wheels.py in its copy of the tree) for the platform named in
HOLD_WHEEL_PLATFORM, e.g. "manylinux2014_x86_64.musllinux_1_1_x86_64". The
executables run on any Python 3, so the tag is py3-none-PLATFORM. Without
HOLD_WHEEL_PLATFORM the wheel is the pure py3-none-any one."""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # building an sdist needs no wheel
    bdist_wheel = None

PLATFORM = os.environ.get("HOLD_WHEEL_PLATFORM", "")

cmdclass = {}


class BuildPy(build_py):
    """Keeps the shipped executables executable, whatever the copy did."""

    def run(self):
        super().run()
        bindir = os.path.join(self.build_lib, "hold", "_bin")
        if os.path.isdir(bindir):
            for name in os.listdir(bindir):
                os.chmod(os.path.join(bindir, name), 0o755)


cmdclass["build_py"] = BuildPy

if bdist_wheel is not None and PLATFORM:

    class PlatformWheel(bdist_wheel):
        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            return "py3", "none", PLATFORM

    cmdclass["bdist_wheel"] = PlatformWheel

setup(cmdclass=cmdclass)
