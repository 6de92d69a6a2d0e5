"""Sandbox images: one tag per (environment, Dockerfile, base image), built when missing.

The image itself is tiny (``sandbox_images/python/Dockerfile``: pytest, a non-root user,
an empty ``/workspace``) on top of a base image: ``pact-sandbox-base:bookworm`` from
``sandbox_images/build-base.sh`` where no registry is reachable, or a public
``python:3.11-slim`` elsewhere (``PACT_SANDBOX_BASE_IMAGE``).

Docker errors are translated here, at the boundary: a missing image becomes
:class:`SandboxImageMissing`, an engine that does not answer :class:`SandboxUnavailable`.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import tarfile
import threading
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from pact_workers.errors import SandboxError
from pact_workers.models.environment import EnvironmentSpec

__all__ = [
    "BASE_IMAGE_ENV",
    "DEFAULT_BASE",
    "IMAGE_REPOSITORY",
    "SandboxImageMissing",
    "SandboxUnavailable",
    "default_base_image",
    "docker_errors",
    "dockerfile_bytes",
    "ensure_image",
    "image_tag",
]

#: The base image when ``PACT_SANDBOX_BASE_IMAGE`` is unset: built by build-base.sh.
DEFAULT_BASE = "pact-sandbox-base:bookworm"
BASE_IMAGE_ENV = "PACT_SANDBOX_BASE_IMAGE"
IMAGE_REPOSITORY = "pact-sandbox"
#: Label every sandbox image carries (also set by the Dockerfile).
IMAGE_LABELS = {"pact-fleet.image": "sandbox"}

BUILD_BASE_HINT = (
    "build it with `sudo sandbox_images/build-base.sh` (no registry needed), or set "
    f"{BASE_IMAGE_ENV} to an image this engine has or can pull (e.g. python:3.11-slim)"
)
START_DOCKER_HINT = (
    "start the Docker engine (`dockerd`, or `scripts/ensure-services`), check DOCKER_HOST "
    "and that this user may use the socket, or run with the local sandbox (--sandbox local)"
)

#: In a source checkout the Dockerfile lives here; the wheel ships an identical copy
#: next to this module (a unit test keeps the two byte-identical).
_REPO_DOCKERFILE = Path(__file__).resolve().parents[2] / "sandbox_images" / "python" / "Dockerfile"

#: One build at a time per process: concurrent runs of a new spec would otherwise
#: all start the same build.
_BUILD_LOCK = threading.Lock()


# Defined in the project's one exception tree; re-exported here where they are raised.
from pact_workers.errors import SandboxImageMissing, SandboxUnavailable  # noqa: E402


def default_base_image() -> str:
    """``PACT_SANDBOX_BASE_IMAGE``, read now (not at import), or :data:`DEFAULT_BASE`."""
    return os.environ.get(BASE_IMAGE_ENV) or DEFAULT_BASE


def dockerfile_bytes() -> bytes:
    """The sandbox Dockerfile: the repository's when running from a checkout, else the
    copy shipped in the package."""
    if _REPO_DOCKERFILE.is_file():
        return _REPO_DOCKERFILE.read_bytes()
    return resources.files("pact_workers.sandbox").joinpath("Dockerfile").read_bytes()


def image_tag(spec: EnvironmentSpec, dockerfile: bytes, base_image: str) -> str:
    """``pact-sandbox:<12 hex>`` over the canonical spec, the Dockerfile and the base.

    A changed environment, Dockerfile or base gives a new tag (so a new image is
    built); an unchanged one gives the same tag (so the image is reused).
    """
    canonical = json.dumps(spec.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256()
    # Length prefixes: no two different triples hash the same concatenation.
    for part in (canonical.encode(), dockerfile, base_image.encode()):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return f"{IMAGE_REPOSITORY}:{digest.hexdigest()[:12]}"


def ensure_image(client: Any, spec: EnvironmentSpec, *, base_image: str | None = None) -> str:
    """Return the tag of the sandbox image for ``spec``, building it first if missing.

    The base is pulled first when the engine does not have it. The tag hashes the
    base's image ID along with its name, so rebuilding the base (``build-base.sh
    --force``) gives new sandbox images rather than reusing ones built on the old base.

    Args:
        client: a ``docker.DockerClient``.
        spec: the environment the image is for.
        base_image: what the Dockerfile builds FROM; default :func:`default_base_image`.

    Raises:
        SandboxImageMissing: the base image is neither present nor pullable.
        SandboxUnavailable: the engine does not answer.
        SandboxError: the build failed for another reason.
    """
    import docker.errors  # type: ignore[import-untyped]

    base = base_image or default_base_image()
    dockerfile = dockerfile_bytes()
    with docker_errors(f"looking up the sandbox base image {base}"):
        base_id = _image_id(client, base) or _pull(client, base)
    tag = image_tag(spec, dockerfile, f"{base}@{base_id}")
    with docker_errors(f"looking up sandbox image {tag}"):
        if _image_id(client, tag) is not None:
            return tag
    with _BUILD_LOCK, docker_errors(f"building sandbox image {tag} FROM {base}"):
        if _image_id(client, tag) is not None:  # another thread built it meanwhile
            return tag
        error = _build(client, tag=tag, dockerfile=dockerfile, base=base)
        if error is not None:
            raise SandboxError(f"building sandbox image {tag} FROM {base} failed: {error}")
        try:
            client.images.get(tag)
        except docker.errors.ImageNotFound as exc:
            raise SandboxError(f"building sandbox image {tag}: the engine has no {tag}") from exc
    return tag


def _image_id(client: Any, name: str) -> str | None:
    import docker.errors

    try:
        return str(client.images.get(name).id)
    except docker.errors.ImageNotFound:
        return None


def _pull(client: Any, base: str) -> str:
    """Pull ``base``; return its ID, or raise SandboxImageMissing saying how to get it."""
    import docker.errors
    import requests.exceptions
    from docker.utils import parse_repository_tag  # type: ignore[import-untyped]

    repository, tag = parse_repository_tag(base)
    try:
        image = client.images.pull(repository, tag=tag or "latest")
    except (docker.errors.APIError, requests.exceptions.ReadTimeout) as exc:
        # Not chained: classify_error follows causes, and the engine reports a registry
        # it cannot reach as a 500, which would make a missing image look transient.
        raise SandboxImageMissing(
            f"the sandbox base image {base!r} is not on this Docker engine and cannot be "
            f"pulled ({exc}); {BUILD_BASE_HINT}"
        ) from None
    return str(image.id)


def _build(client: Any, *, tag: str, dockerfile: bytes, base: str) -> str | None:
    """Build ``tag``; return None on success or the builder's error message."""
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(dockerfile))
    context.seek(0)
    stream = client.api.build(
        fileobj=context,
        custom_context=True,
        tag=tag,
        buildargs={"BASE_IMAGE": base},
        labels=IMAGE_LABELS,
        rm=True,
        forcerm=True,
        decode=True,
    )
    errors: list[str] = []
    for chunk in stream:
        if "error" in chunk:
            errors.append(str(chunk.get("error", "")).strip())
    return "; ".join(errors) or None


@contextlib.contextmanager
def docker_errors(action: str) -> Iterator[None]:
    """Translate docker-py and transport errors raised while doing ``action``.

    PactErrors pass through untouched; an image the engine does not have becomes
    SandboxImageMissing, an engine that does not answer SandboxUnavailable, any other
    engine error SandboxError.
    """
    import docker.errors
    import requests.exceptions

    try:
        yield
    except docker.errors.ImageNotFound as exc:
        raise SandboxImageMissing(f"{action}: image not found ({exc}); {BUILD_BASE_HINT}") from exc
    except docker.errors.APIError as exc:
        raise SandboxError(f"{action}: the Docker engine refused: {exc}") from exc
    except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
        raise SandboxUnavailable(
            f"{action}: the Docker engine does not answer ({exc}); {START_DOCKER_HINT}"
        ) from exc
    except docker.errors.DockerException as exc:
        # docker.from_env() raises the bare DockerException when no engine answers.
        raise SandboxUnavailable(
            f"{action}: cannot use the Docker engine ({exc}); {START_DOCKER_HINT}"
        ) from exc
