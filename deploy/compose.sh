#!/bin/sh
# Run Compose on compose.yaml with this machine's defaults (make fleet-up, fleet-down,
# fleet-logs use it):
#   - `docker compose` (v2) if the CLI has it, else docker-compose (1.29 works);
#   - PACT_REDIS_IMAGE=pact-redis:bookworm when that local image exists and redis:7
#     does not (no registry here: sandbox_images/build-base.sh --redis builds it);
#   - PACT_WORKER_USER=10010:<group of the socket> on Linux when the Docker socket is
#     group-writable: workers run unprivileged, with just the socket's group;
#   - `up` refuses to start without FLOWER_PASSWORD (Flower would not start either).
# Anything already set in the environment or in .env wins.
#
# Usage: deploy/compose.sh COMPOSE-ARGS...    e.g. deploy/compose.sh up -d --scale worker-code=3
set -eu

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SOCKET=/var/run/docker.sock

die() { echo "fleet: error: $*" >&2; exit 1; }
log() { echo "fleet: $*" >&2; }

[ "$#" -gt 0 ] || die "usage: $0 COMPOSE-ARGS... (e.g. up -d)"
cd "$ROOT"

# Set in the environment, or in the .env file Compose reads?
configured() {
    eval "[ -n \"\${$1:-}\" ]" && return 0
    [ -f .env ] && grep -Eq "^[[:space:]]*(export[[:space:]]+)?$1=." .env
}
has_image() { docker image inspect "$1" >/dev/null 2>&1; }

if docker compose version >/dev/null 2>&1; then
    set -- docker compose "$@"
elif command -v docker-compose >/dev/null 2>&1; then
    set -- docker-compose "$@"
else
    die "neither \`docker compose\` nor docker-compose is installed" \
        "(apt-get install docker-compose; scripts/ensure-services does as root)"
fi

if ! configured PACT_REDIS_IMAGE && has_image pact-redis:bookworm && ! has_image redis:7; then
    export PACT_REDIS_IMAGE=pact-redis:bookworm
    log "using the local Redis image $PACT_REDIS_IMAGE"
fi

if ! configured PACT_WORKER_USER && [ "$(uname -s)" = Linux ] && [ -S "$SOCKET" ]; then
    mode="$(stat -c %a "$SOCKET")"
    case "$mode" in
        ?[67]?)
            PACT_WORKER_USER="10010:$(stat -c %g "$SOCKET")"
            export PACT_WORKER_USER
            log "workers run as $PACT_WORKER_USER (uid 10010, the group of $SOCKET)" ;;
        *) log "$SOCKET is not group-writable (mode $mode): workers run as root" ;;
    esac
fi

case " $* " in
    *" up "*)
        configured FLOWER_PASSWORD \
            || die "set FLOWER_PASSWORD (export it, or put it in $ROOT/.env; see" \
                   "deploy/env.example) so that Flower is not served without a password" ;;
esac

exec "$@"
