#!/bin/sh
# Build every wheel the fleet image installs, on this machine, into deploy/wheels/:
# the project with its [ops] extra (Flower) and all its dependencies, plus the pip
# wheel itself. deploy/Dockerfile installs from these alone (pip run from its own
# wheel, --no-index), so `docker build` needs no package index and the base image
# needs no pip.
#
# Usage: deploy/build-wheels.sh
#   PYTHON          the interpreter that builds the wheels (default python3). Some
#                   dependencies (pydantic-core, PyYAML, charset-normalizer...) ship
#                   binary wheels per Python version and platform, so it must be
#                   CPython 3.11 on Linux, on the Docker engine's CPU architecture.
#   PACT_WHEEL_DIR  where the wheels go (default deploy/wheels)
#   PIP_INDEX_URL and the other PIP_* variables work as pip documents them.
#
# The directory is rebuilt from scratch each time (pip's cache keeps that cheap), so
# it never holds stale versions that --find-links could pick up.
set -eu

DEPLOY="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$DEPLOY")"
PYTHON="${PYTHON:-python3}"
OUT="${PACT_WHEEL_DIR:-$DEPLOY/wheels}"

die() { echo "build-wheels: error: $*" >&2; exit 1; }
log() { echo "build-wheels: $*" >&2; }

case "${1:-}" in
    "") ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (usage: $0)" ;;
esac

command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found (set PYTHON=/path/to/python3.11)"
found="$("$PYTHON" -c 'import platform, sys
print(platform.python_implementation(), "%d.%d" % sys.version_info[:2], sys.platform,
      platform.machine())')" || die "$PYTHON does not run"
# shellcheck disable=SC2086
set -- $found
[ "$1 $2 $3" = "CPython 3.11 linux" ] \
    || die "$PYTHON is $1 $2 on $3; the image runs CPython 3.11 on Linux, so build the" \
           "wheels with one (PYTHON=python3.11 on a Linux machine)"
if command -v docker >/dev/null 2>&1 \
        && engine_arch="$(docker info --format '{{.Architecture}}' 2>/dev/null)"; then
    [ "$engine_arch" = "$4" ] \
        || die "$PYTHON builds $4 wheels but the Docker engine runs $engine_arch images"
fi
"$PYTHON" -m pip --version >/dev/null 2>&1 || die "$PYTHON has no pip (python3 -m ensurepip)"

started="$(date +%s)"
TMP="$OUT.tmp.$$"
SRC="$TMP.src"
trap 'rm -rf "$TMP" "$SRC"' EXIT INT TERM
rm -rf "$TMP" "$SRC"
mkdir -p "$TMP" "$SRC"

# The project is built from a clean copy of what goes into the wheel: setuptools
# builds in the source tree otherwise, and its build/ directory there would keep
# modules deleted since and ship them.
(
    cd "$ROOT"
    set -- pyproject.toml README.md pact_workers scheduler
    for f in setup.py setup.cfg MANIFEST.in LICENSE LICENSE.txt LICENSE.md; do
        [ ! -e "$f" ] || set -- "$@" "$f"
    done
    tar -cf - --exclude=__pycache__ --exclude='*.pyc' "$@"
) | tar -xf - -C "$SRC" || die "could not copy the sources to $SRC"

log "building wheels of pact-fleet[ops], its dependencies and pip into $OUT"
"$PYTHON" -m pip wheel --quiet --disable-pip-version-check --wheel-dir "$TMP" \
    "${SRC}[ops]" pip \
    || die "pip wheel failed (see above); is PyPI (or PIP_INDEX_URL) reachable?"

# pip evaluated the dependencies' environment markers for THIS interpreter, but the
# image's 3.11 may be another micro release (Debian bookworm has 3.11.2; redis needs
# async-timeout below 3.11.3). Add what any 3.11.x needs, until nothing is missing.
round=0
while :; do
    extra="$("$PYTHON" - "$TMP" <<'PY'
import email.parser, pathlib, sys, zipfile
from pip._vendor.packaging.markers import default_environment
from pip._vendor.packaging.requirements import Requirement
from pip._vendor.packaging.utils import canonicalize_name

wheels = sorted(pathlib.Path(sys.argv[1]).glob("*.whl"))
have = {canonicalize_name(w.name.split("-")[0]) for w in wheels}
wanted = set()
for wheel in wheels:
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        doc = email.parser.BytesParser().parsebytes(zf.read(meta), headersonly=True)
    for line in doc.get_all("Requires-Dist") or []:
        req = Requirement(line)
        if req.marker is None or "extra" in str(req.marker):
            continue  # unconditional (pip got it), or only with an extra
        if canonicalize_name(req.name) in have:
            continue
        for micro in range(30):
            env = {**default_environment(), "python_full_version": f"3.11.{micro}",
                   "python_version": "3.11", "implementation_version": f"3.11.{micro}"}
            if req.marker.evaluate(env):
                wanted.add(f"{req.name}{req.specifier}")
                break
print(" ".join(sorted(wanted)))
PY
)" || die "could not read the wheels' metadata"
    [ -n "$extra" ] || break
    round=$((round + 1))
    [ "$round" -le 5 ] || die "still missing after 5 rounds: $extra"
    log "adding what other Python 3.11 releases need: $extra"
    # shellcheck disable=SC2086
    "$PYTHON" -m pip wheel --quiet --disable-pip-version-check --wheel-dir "$TMP" $extra \
        || die "pip wheel $extra failed"
done

ls "$TMP"/pact_fleet-*.whl >/dev/null 2>&1 || die "no pact_fleet wheel was built"
ls "$TMP"/pip-*.whl >/dev/null 2>&1 || die "no pip wheel was built"
# A dependency without a binary wheel for this platform was built from its sdist
# here: fine, as long as this machine matches the image (checked above).

rm -rf "$OUT"
mv "$TMP" "$OUT"
count="$(find "$OUT" -name "*.whl" | wc -l)"
size="$(du -sh "$OUT" | cut -f1)"
log "$count wheels ($size) in $OUT in $(( $(date +%s) - started )) s"
