"""The package's version. The release build (scripts/build_wheels.py) writes
the release's version here in its copy of the tree; this one marks a
source checkout."""

__version__ = "0.0.0.dev0"
