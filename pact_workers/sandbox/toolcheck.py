"""Checking an image for the EnvironmentSpec's interpreter and required tools: the
command that looks them up IN the image (with the PATH the command will have), and
what its output means.
"""

from __future__ import annotations

from pact_workers.errors import EnvironmentSpecError
from pact_workers.models.environment import EnvironmentSpec

_SCRIPT = (
    'p=$(command -v "$1") && echo "python=$p" || echo "nopython"; shift; '
    'for t in "$@"; do command -v "$t" >/dev/null 2>&1 || echo "missing=$t"; done'
)


def tool_check_command(spec: EnvironmentSpec) -> list[str]:
    """A shell command printing ``python=<path>`` (or ``nopython``) and a
    ``missing=<tool>`` line per required tool not found."""
    return ["/bin/sh", "-c", _SCRIPT, "sh", spec.python_path, *spec.required_tools]


def checked_python(stdout: str, tag: str, path: str, spec: EnvironmentSpec) -> str:
    """The interpreter's path in image ``tag``, from the check command's output.

    Raises:
        EnvironmentSpecError: the interpreter or a required tool is missing.
    """
    lines = stdout.split()
    python = next((line[7:] for line in lines if line.startswith("python=")), None)
    if python is None:
        raise EnvironmentSpecError(
            f"python interpreter {spec.python_path!r} not found in sandbox image {tag} "
            f"(PATH {path}); set environment.python_path in pact.yaml to an absolute "
            "path in the image, or add its directory to environment.extra_path_dirs"
        )
    missing = [line[8:] for line in lines if line.startswith("missing=")]
    if missing:
        raise EnvironmentSpecError(
            f"required tools not found in sandbox image {tag} (PATH {path}): "
            f"{', '.join(missing)}; install them in the image (sandbox_images/python/"
            "Dockerfile) or add their directory to environment.extra_path_dirs in pact.yaml"
        )
    return python
