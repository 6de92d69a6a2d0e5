#!/bin/sh
# Build the fleet image pact-fleet:<version> and pact-fleet:latest from deploy/Dockerfile.
#
# Usage: deploy/build-image.sh [--no-wheels] [--if-missing]
#   --no-wheels     use deploy/wheels as it is (default: run deploy/build-wheels.sh first)
#   --if-missing    exit 0 at once when pact-fleet:latest already exists
#   PACT_FLEET_BASE_IMAGE  the image to build FROM. Default: python:3.11-slim if this
#                   engine has it; else pact-sandbox-base:bookworm if this engine has it
#                   (built without any registry by sandbox_images/build-base.sh); else
#                   python:3.11-slim, pulled.
#   PACT_FLEET_REPOSITORY  the repository to tag (default pact-fleet)
set -eu

DEPLOY="$(cd "$(dirname "$0")" && pwd)"
REPOSITORY="${PACT_FLEET_REPOSITORY:-pact-fleet}"
WHEELS=1
IF_MISSING=0

die() { echo "build-image: error: $*" >&2; exit 1; }
log() { echo "build-image: $*" >&2; }

for arg in "$@"; do
    case "$arg" in
        --no-wheels) WHEELS=0 ;;
        --if-missing) IF_MISSING=1 ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument '$arg' (usage: $0 [--no-wheels] [--if-missing])" ;;
    esac
done

command -v docker >/dev/null 2>&1 || die "the docker CLI is not installed (apt-get install docker.io)"
docker info >/dev/null 2>&1 \
    || die "the Docker engine does not answer; start dockerd (scripts/ensure-services does)"

if [ "$IF_MISSING" = 1 ] && docker image inspect "$REPOSITORY:latest" >/dev/null 2>&1; then
    log "$REPOSITORY:latest already exists (run without --if-missing to rebuild)"
    exit 0
fi

has_image() { docker image inspect "$1" >/dev/null 2>&1; }
BASE="${PACT_FLEET_BASE_IMAGE:-}"
if [ -z "$BASE" ]; then
    if has_image python:3.11-slim; then
        BASE=python:3.11-slim
    elif has_image pact-sandbox-base:bookworm; then
        BASE=pact-sandbox-base:bookworm
    else
        BASE=python:3.11-slim
        log "no local base image; the build pulls $BASE (without a registry, build" \
            "pact-sandbox-base:bookworm first: sudo sandbox_images/build-base.sh)"
    fi
fi

# What the image is built from, as a label: the sha256 over "sha256  path" lines of
# every file of the packages and pyproject.toml, sorted by path (as `sha256sum` prints
# them). tests/integration/test_compose.py computes the same and rebuilds a stale image.
# Computed before the wheels: an edit made during the build makes the label stale,
# never wrong in the other direction.
SOURCE_DIGEST="$(cd "$DEPLOY/.." && find pact_workers scheduler pyproject.toml -type f \
    ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 | LC_ALL=C sort -z \
    | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)"

if [ "$WHEELS" = 1 ]; then
    "$DEPLOY/build-wheels.sh"
fi
set -- "$DEPLOY"/wheels/pact_fleet-*-py3-none-any.whl
[ -f "$1" ] || die "no pact_fleet wheel in $DEPLOY/wheels (run deploy/build-wheels.sh)"
[ "$#" = 1 ] || die "several pact_fleet wheels in $DEPLOY/wheels; rerun deploy/build-wheels.sh"
VERSION="$(basename "$1" | sed 's/^pact_fleet-\([^-]*\)-.*/\1/')"

previous="$(docker image inspect --format '{{.Id}}' "$REPOSITORY:latest" 2>/dev/null || true)"
started="$(date +%s)"
log "building $REPOSITORY:$VERSION FROM $BASE"
docker build --quiet --force-rm \
    --build-arg "BASE_IMAGE=$BASE" \
    --build-arg "VERSION=$VERSION" \
    --label "pact-fleet.source-digest=$SOURCE_DIGEST" \
    --tag "$REPOSITORY:$VERSION" \
    --tag "$REPOSITORY:latest" \
    "$DEPLOY" >/dev/null \
    || die "docker build failed (rerun without --quiet: docker build --build-arg" \
           "BASE_IMAGE=$BASE $DEPLOY)"
# The build stage's image (wheels and all) is left untagged: not needed any more.
docker image prune --force --filter label=pact-fleet.image=fleet-build >/dev/null 2>&1 || true
# The image the tags pointed to before, now untagged: remove it (unless a container
# still uses it), so that rebuilding does not pile up dangling images.
current="$(docker image inspect --format '{{.Id}}' "$REPOSITORY:latest")"
if [ -n "$previous" ] && [ "$previous" != "$current" ] \
        && [ "$(docker image inspect --format '{{len .RepoTags}}' "$previous" 2>/dev/null)" = 0 ]; then
    docker image rm "$previous" >/dev/null 2>&1 \
        || log "the previous image ${previous#sha256:} is still used by a container; kept"
fi
size="$(docker image inspect --format '{{.Size}}' "$REPOSITORY:$VERSION")"
log "built $REPOSITORY:$VERSION and :latest ($((size / 1000000)) MB) in" \
    "$(( $(date +%s) - started )) s"
