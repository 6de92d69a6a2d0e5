#!/bin/sh
# Build the sandbox base image (or, with --redis, a Redis image) without any registry:
#   debootstrap a minimal Debian (python3, pytest, CA certificates) into a
#   temporary directory, then `docker import` it as an image.
#
# Usage: sandbox_images/build-base.sh [--force] [--redis]
#   PACT_SANDBOX_BASE_IMAGE   the tag to create   (default pact-sandbox-base:bookworm)
#   PACT_DEBIAN_MIRROR        the Debian mirror   (default http://deb.debian.org/debian)
#   PACT_DEBIAN_SUITE         the Debian release  (default bookworm)
#   --redis                   build pact-redis:bookworm instead: Debian's redis-server,
#                             for compose.yaml where the public redis image cannot be
#                             pulled (PACT_REDIS_IMAGE=pact-redis:bookworm)
#
# Idempotent: exits 0 at once when the image already exists, unless --force.
# Needs root (debootstrap creates device nodes and chowns files).
set -eu

TAG="${PACT_SANDBOX_BASE_IMAGE:-pact-sandbox-base:bookworm}"
MIRROR="${PACT_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE="${PACT_DEBIAN_SUITE:-bookworm}"
FORCE=0
KIND=sandbox
INCLUDE=python3,python3-pytest,ca-certificates

die() { echo "build-base: error: $*" >&2; exit 1; }
log() { echo "build-base: $*" >&2; }

for arg in "$@"; do
    case "$arg" in
        --force) FORCE=1 ;;
        --redis) KIND=redis ;;
        -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument '$arg' (usage: $0 [--force] [--redis])" ;;
    esac
done
if [ "$KIND" = redis ]; then
    TAG="pact-redis:$SUITE"
    INCLUDE=redis-server
fi

command -v docker >/dev/null 2>&1 \
    || die "the docker CLI is not installed (apt-get install docker.io)"
docker info >/dev/null 2>&1 \
    || die "the Docker engine does not answer; start dockerd (scripts/ensure-services does)"

if [ "$FORCE" = 0 ] && docker image inspect "$TAG" >/dev/null 2>&1; then
    log "$TAG already exists (use --force to rebuild)"
    exit 0
fi

[ "$(id -u)" = 0 ] || die "debootstrap needs root; run this script as root (or with sudo)"
DEBOOTSTRAP="$(command -v debootstrap || true)"
[ -n "$DEBOOTSTRAP" ] || [ ! -x /usr/sbin/debootstrap ] || DEBOOTSTRAP=/usr/sbin/debootstrap
[ -n "$DEBOOTSTRAP" ] || die "debootstrap is not installed (apt-get install debootstrap)"

started="$(date +%s)"
ROOTFS="$(mktemp -d "${TMPDIR:-/tmp}/pact-rootfs.XXXXXX")"
# The root filesystem is large and owned by root: never leave it behind.
trap 'rm -rf "$ROOTFS"' EXIT INT TERM

log "debootstrap $SUITE from $MIRROR into $ROOTFS"
"$DEBOOTSTRAP" --variant=minbase --include="$INCLUDE" \
    "$SUITE" "$ROOTFS" "$MIRROR" >"$ROOTFS.log" 2>&1 || {
    tail -n 20 "$ROOTFS.log" >&2
    rm -f "$ROOTFS.log"
    die "debootstrap failed (last lines above); check the mirror ($MIRROR)"
}
rm -f "$ROOTFS.log"

# Caches and lists are dead weight in an image nothing ever runs apt in.
rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/cache/apt/*.bin \
    "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/log/* "$ROOTFS"/tmp/* \
    "$ROOTFS"/usr/share/doc/* "$ROOTFS"/usr/share/man/* "$ROOTFS"/usr/share/info/*

log "importing as $TAG"
if [ "$KIND" = redis ]; then
    # As the official image: data in /data (owned by the redis user the package
    # created), the server on every interface. Protected mode is off because the
    # server is meant for a private container network (the official image builds it
    # off too); compose.yaml publishes no Redis port.
    mkdir -p "$ROOTFS/data"
    chroot "$ROOTFS" chown redis:redis /data || die "the redis user is missing in the rootfs"
    tar --numeric-owner -C "$ROOTFS" -c . | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'USER redis' \
        --change 'WORKDIR /data' \
        --change 'VOLUME /data' \
        --change 'EXPOSE 6379' \
        --change 'LABEL pact-fleet.image=redis' \
        --change 'CMD ["redis-server", "--protected-mode", "no", "--dir", "/data"]' \
        --message "pact-fleet redis: debootstrap $SUITE minbase + redis-server" \
        - "$TAG" >/dev/null
else
    tar --numeric-owner -C "$ROOTFS" -c . | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'CMD ["python3"]' \
        --message "pact-fleet sandbox base: debootstrap $SUITE minbase + python3, pytest" \
        - "$TAG" >/dev/null
fi

elapsed="$(( $(date +%s) - started ))"
log "built $TAG in ${elapsed} s"
