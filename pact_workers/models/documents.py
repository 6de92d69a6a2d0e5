"""Reading documents a user hands over: trees, settings, contracts.

Every such file is read the same careful way: a regular file only (a device or
a pipe would be read forever), of bounded size, parsed as JSON or YAML with
duplicate keys refused (both formats silently keep the last one otherwise;
YAML merge keys are defaults, not duplicates), and input nested deeper than the
parser allows is an error, not a crash; so is a value the parser cannot convert (a
number of more digits than Python converts, a date such as 2020-13-45). Errors are
:class:`TreeError` (an input error) naming the file.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from pact_workers.errors import InputError, TreeError

__all__ = [
    "given",
    "load_yaml",
    "not_a_directory",
    "parse_tree_text",
    "parse_value_problem",
    "read_input_file",
    "read_json_input",
    "validation_problems",
    "yaml_position",
]


def read_input_file(path: Path, max_bytes: int) -> bytes:
    """The bytes of a regular file a user named, refusing devices, pipes and giants.

    Raises:
        OSError: the file cannot be read; its ``strerror`` says why.
    """
    # Non-blocking open: opening a FIFO with no writer would otherwise wait forever.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a device, pipe or socket)")
        if info.st_size > max_bytes:
            raise OSError(errno.EFBIG, f"larger than {max_bytes // (1024 * 1024)} MB")
        return fh.read(max_bytes + 1)


def not_a_directory(path: Path) -> str:
    """Why ``path``, which a user gave as a directory, is none: it does not exist, or it
    is something else (a file)."""
    if path.exists():
        return "is not a directory"
    return "no such directory"


def read_json_input(path: Path, max_bytes: int) -> tuple[bytes, Any]:
    """The bytes of a JSON file a user named (see :func:`read_input_file`), and the
    document they parse to.

    Raises:
        InputError: naming the file: it cannot be read, is not UTF-8 text, is not
            JSON, or is nested deeper than the parser allows.
    """
    try:
        raw = read_input_file(path, max_bytes)
        return raw, json.loads(raw.decode("utf-8-sig"))  # a BOM, as some editors write
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: invalid JSON: {exc}") from None
    except ValueError as exc:
        raise InputError(f"{path}: invalid JSON: {parse_value_problem(exc)}") from None
    except RecursionError:
        raise InputError(f"{path}: nested deeper than the parser allows") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def validation_problems(exc: ValidationError, root: str, *, limit: int = 5) -> str:
    """The first ``limit`` problems of ``exc``, each as ``field.path: message`` (``root``
    for a problem with the document as a whole)."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or root}: {e['msg']}" for e in exc.errors()[:limit]
    )


def parse_tree_text(text: str, where: str, *, yaml_format: bool) -> Any:
    """Parse JSON or YAML, rejecting duplicate keys (both formats silently keep the last)."""
    if not text.strip():
        raise TreeError(f"{where}: the file is empty; a tree needs root_id and nodes")
    try:
        return _parse(text, where, yaml_format=yaml_format)
    except RecursionError:
        raise TreeError(
            f"{where}: nested deeper than the parser allows; a tree is a flat mapping of "
            "nodes (parent_id and children link them), not nested lists or mappings"
        ) from None


def _parse(text: str, where: str, *, yaml_format: bool) -> Any:
    if yaml_format:
        try:
            return yaml.load(text, Loader=_StrictYamlLoader)
        except _DuplicateKey as exc:
            raise TreeError(f"{where}: {exc}") from exc
        except yaml.YAMLError as exc:
            raise TreeError(f"{where}: invalid YAML{yaml_position(exc)}") from exc
        except ValueError as exc:
            raise TreeError(f"{where}: invalid YAML: {parse_value_problem(exc)}") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_pairs)
    except _DuplicateKey as exc:
        raise TreeError(f"{where}: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise TreeError(
            f"{where}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from exc
    except ValueError as exc:
        raise TreeError(f"{where}: invalid JSON: {parse_value_problem(exc)}") from None


def load_yaml(text: str) -> Any:
    """YAML as the safe loader reads it, except that a key written twice in one mapping
    is refused (a ``ValueError`` naming the key and its line), as in a tree: the safe
    loader keeps the last silently, so an edit lower in a file undid one above it."""
    return yaml.load(text, Loader=_StrictYamlLoader)


def parse_value_problem(exc: ValueError) -> str:
    """What a parser's ``ValueError`` (a value it could not convert) says, in the
    user's terms: Python's limit on an integer's digits names a setting of Python's."""
    text = str(exc)
    if "integer string conversion" in text:
        return (
            f"a number of more than {sys.get_int_max_str_digits()} digits; "
            "no field takes a number that long"
        )
    return text


def given(error: Any) -> str:
    """`` (got X)`` for a short scalar input of a pydantic error, else nothing: the
    message then shows what was written, not only what was expected."""
    value = error.get("input")
    short = isinstance(value, bool | int | float) or (isinstance(value, str) and len(value) <= 60)
    if short and error["type"] not in {"missing", "extra_forbidden"}:
        return f" (got {value!r})"
    return ""


def yaml_position(exc: yaml.YAMLError) -> str:
    """Where a YAML error is and what it is, on one line (`` at line L column C: ...``),
    to follow the file's name: PyYAML's own text spans lines and names the text it
    parsed ``<unicode string>``."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is None:
        return f": {problem}"
    return f" at line {mark.line + 1} column {mark.column + 1}: {problem}"


class _DuplicateKey(ValueError):
    pass


def _no_duplicate_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(
                f"duplicate key {key!r} (a key may appear only once in a mapping, a component "
                "id included)"
            )
        out[key] = value
    return out


class _StrictYamlLoader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    # Only keys written out in this mapping may not repeat; keys brought in by a merge
    # (``<<: *anchor``) are defaults that the mapping's own keys override, as YAML says.
    explicit: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        if key in explicit:
            raise _DuplicateKey(
                f"duplicate key {key!r} at line {key_node.start_mark.line + 1} "
                "(a key may appear only once in a mapping, a component id included)"
            )
        explicit[key] = key_node.start_mark.line
    loader.flatten_mapping(node)
    out: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        out[loader.construct_object(key_node, deep=True)] = loader.construct_object(
            value_node, deep=True
        )
    return out


_StrictYamlLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
    _construct_mapping,
)
