"""Name resolution for evaluation: immutable variable bindings and built-in functions."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["ArityError", "Builtin", "Environment", "UndefinedNameError"]

Numeric = int | float


class UndefinedNameError(LookupError):
    """A variable or function name with no binding; ``kind`` is 'variable' or 'function'."""

    def __init__(self, name: str, kind: str) -> None:
        self.name = name
        self.kind = kind
        super().__init__(f"undefined {kind} {name!r}")


class ArityError(TypeError):
    """A built-in function called with a number of arguments it does not accept."""

    def __init__(self, name: str, expected: str, got: int) -> None:
        self.name = name
        self.expected = expected
        self.got = got
        super().__init__(f"{name}() takes {expected} argument(s), got {got}")


@dataclass(frozen=True)
class Builtin:
    """A built-in function: accepts min_args..max_args arguments (max_args None: no limit)."""

    name: str
    min_args: int
    max_args: int | None
    impl: Callable[..., Numeric]

    def __post_init__(self) -> None:
        if not _is_identifier(self.name):
            raise ValueError(f"builtin name must be an ASCII identifier, got {self.name!r}")
        if not _is_count(self.min_args):
            raise ValueError(f"min_args must be an int >= 0, got {self.min_args!r}")
        if self.max_args is not None and not (
            _is_count(self.max_args) and self.max_args >= self.min_args
        ):
            raise ValueError(f"max_args must be None or an int >= min_args, got {self.max_args!r}")
        if not callable(self.impl):
            raise TypeError(f"impl of {self.name!r} must be callable")

    def expected(self) -> str:
        if self.max_args is None:
            return f"at least {self.min_args}"
        if self.max_args == self.min_args:
            return str(self.min_args)
        return f"{self.min_args} to {self.max_args}"


def _is_identifier(name: object) -> bool:
    return isinstance(name, str) and name.isidentifier() and name.isascii()


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_binding(name: object, value: object) -> None:
    if not _is_identifier(name):
        raise ValueError(f"variable name must be an ASCII identifier, got {name!r}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"value of {name!r} must be int or float, got {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"value of {name!r} must be finite, got {value!r}")


def _default_functions() -> dict[str, Builtin]:
    return {
        "abs": Builtin("abs", 1, 1, abs),
        "min": Builtin("min", 1, None, lambda *args: min(args)),
        "max": Builtin("max", 1, None, lambda *args: max(args)),
        "sqrt": Builtin("sqrt", 1, 1, math.sqrt),
    }


class Environment:
    """Variable bindings and functions; never changes after construction."""

    def __init__(
        self,
        variables: Mapping[str, Numeric] | None = None,
        functions: Mapping[str, Builtin] | None = None,
    ) -> None:
        variables = dict(variables or {})
        for name, value in variables.items():
            _check_binding(name, value)
        functions = dict(functions or {})
        for name, builtin in functions.items():
            if not _is_identifier(name) or not isinstance(builtin, Builtin):
                raise TypeError(f"function {name!r} must be a Builtin under an identifier name")
        self._variables = MappingProxyType(variables)
        self._functions = MappingProxyType(functions)

    @classmethod
    def default(cls) -> Environment:
        """Constants pi and e; functions abs, min, max and sqrt."""
        return cls({"pi": math.pi, "e": math.e}, _default_functions())

    @property
    def variable_names(self) -> frozenset[str]:
        return frozenset(self._variables)

    @property
    def function_names(self) -> frozenset[str]:
        return frozenset(self._functions)

    def has_variable(self, name: str) -> bool:
        return name in self._variables

    def has_function(self, name: str) -> bool:
        return name in self._functions

    def lookup(self, name: str) -> Numeric:
        """The value bound to variable ``name``."""
        try:
            return self._variables[name]
        except KeyError:
            raise UndefinedNameError(name, "variable") from None

    def call(self, name: str, args: Sequence[Numeric]) -> Numeric:
        """Call built-in ``name`` with ``args`` after checking its arity."""
        builtin = self._functions.get(name)
        if builtin is None:
            raise UndefinedNameError(name, "function")
        count = len(args)
        if count < builtin.min_args or (builtin.max_args is not None and count > builtin.max_args):
            raise ArityError(name, builtin.expected(), count)
        return builtin.impl(*args)

    def with_variables(self, variables: Mapping[str, Numeric]) -> Environment:
        """A new environment with ``variables`` added or replacing existing bindings."""
        merged = {**self._variables, **dict(variables)}
        return Environment(merged, self._functions)
