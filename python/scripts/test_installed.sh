#!/usr/bin/env bash
# Installs a wheel as a user would and runs the package's tests against it:
#
#   python/scripts/test_installed.sh WHEEL
#
# A fresh virtual environment (Debian's /usr/bin/python3 -m venv, with the
# system's site packages so that Debian's python3-filelock serves the
# interop test), `pip install --no-index` of the wheel alone, and the tests
# run from a scratch directory, so that only the installed package can be
# imported, with Go removed from PATH.
#
# A platform wheel must work with nothing else: HOLD_BIN is unset and hold
# removed from PATH too, so the tests run the wheel's own hold. The pure
# py3-none-any wheel needs a hold: HOLD_BIN, or hold on PATH, is kept.
set -euo pipefail

if (($# != 1)) || [ ! -f "$1" ]; then
	echo "usage: $0 WHEEL" >&2
	exit 2
fi
wheel=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
tests=$(cd "$(dirname "$0")/../tests" && pwd)
python=${PYTHON:-/usr/bin/python3}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# PATH without the directories that hold go (nor, for a platform wheel,
# hold).
pure=false
case "$(basename "$wheel")" in *-none-any.whl) pure=true ;; esac
newpath=
IFS=: read -ra dirs <<<"$PATH"
for d in "${dirs[@]}"; do
	[ -n "$d" ] || continue
	[ -x "$d/go" ] && continue
	if ! $pure && [ -x "$d/hold" ]; then continue; fi
	newpath=${newpath:+$newpath:}$d
done
if $pure; then
	if [ -z "${HOLD_BIN:-}" ] && ! PATH=$newpath command -v hold >/dev/null; then
		echo "$0: the pure wheel needs a hold: set HOLD_BIN or put hold on PATH" >&2
		exit 2
	fi
else
	unset HOLD_BIN
fi

"$python" -m venv --system-site-packages "$scratch/venv"
"$scratch/venv/bin/python" -m pip install --quiet --no-index --no-deps --disable-pip-version-check "$wheel"
cp -r "$tests" "$scratch/tests"
# The README tests check python/README.md against the installed code: they
# read it beside the tests, as in the clone.
cp "$tests/../README.md" "$scratch/README.md"
cd "$scratch"
unset PYTHONPATH
export PATH=$newpath PYTHONDONTWRITEBYTECODE=1
if command -v go >/dev/null; then
	echo "$0: go is still on PATH: $(command -v go)" >&2
	exit 1
fi
"$scratch/venv/bin/python" - <<'PY'
import os, sys, hold
where = os.path.dirname(hold.__file__)
print(f"testing hold-lock {hold.__version__} installed in {where}", file=sys.stderr)
assert "site-packages" in where, where
PY
"$scratch/venv/bin/python" -m unittest discover -s tests -v
