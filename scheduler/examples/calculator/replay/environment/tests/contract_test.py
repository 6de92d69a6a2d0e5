"""Contract tests for environment: Environment, Builtin, UndefinedNameError, ArityError."""

import math

import pytest
from environment import ArityError, Builtin, Environment, UndefinedNameError


def test_default_environment_constants_and_functions():
    env = Environment.default()
    assert env.lookup("pi") == math.pi
    assert env.lookup("e") == math.e
    assert env.variable_names == frozenset({"pi", "e"})
    assert env.function_names == frozenset({"abs", "min", "max", "sqrt"})


def test_empty_environment_has_no_names():
    env = Environment()
    assert env.variable_names == frozenset()
    assert env.function_names == frozenset()


def test_lookup_of_unknown_variable_raises_undefined_name_error():
    with pytest.raises(UndefinedNameError) as info:
        Environment.default().lookup("x")
    assert info.value.name == "x"
    assert info.value.kind == "variable"
    assert isinstance(info.value, LookupError)


def test_with_variables_returns_a_new_environment_and_leaves_the_original():
    base = Environment.default()
    extended = base.with_variables({"x": 3, "pi": 3})
    assert extended.lookup("x") == 3
    assert extended.lookup("pi") == 3
    assert base.lookup("pi") == math.pi
    assert not base.has_variable("x")
    assert extended.has_function("sqrt")


def test_bindings_are_copied_not_shared():
    values = {"x": 1}
    env = Environment(values)
    values["x"] = 2
    assert env.lookup("x") == 1


def test_invalid_variable_names_and_values_are_rejected():
    env = Environment.default()
    with pytest.raises(ValueError):
        env.with_variables({"1x": 1})
    with pytest.raises(TypeError):
        env.with_variables({"x": "1"})
    with pytest.raises(TypeError):
        env.with_variables({"flag": True})
    with pytest.raises(ValueError):
        env.with_variables({"x": float("inf")})
    with pytest.raises(ValueError):
        Environment({"x": float("nan")})


def test_builtin_functions_compute():
    env = Environment.default()
    assert env.call("abs", [-4]) == 4
    assert env.call("min", [3, 1.5, 2]) == 1.5
    assert env.call("max", [3]) == 3
    root = env.call("sqrt", [16])
    assert root == 4.0 and type(root) is float


def test_sqrt_of_negative_raises_value_error():
    with pytest.raises(ValueError):
        Environment.default().call("sqrt", [-1])


def test_unknown_function_raises_undefined_name_error():
    with pytest.raises(UndefinedNameError) as info:
        Environment.default().call("log", [1])
    assert info.value.kind == "function"
    assert info.value.name == "log"


def test_wrong_argument_count_raises_arity_error():
    env = Environment.default()
    with pytest.raises(ArityError) as info:
        env.call("sqrt", [1, 2])
    assert (info.value.name, info.value.expected, info.value.got) == ("sqrt", "1", 2)
    with pytest.raises(ArityError) as info:
        env.call("max", [])
    assert info.value.expected == "at least 1"
    assert isinstance(info.value, TypeError)


def test_custom_builtins_with_a_range_of_arities():
    hyp = Builtin("hyp", 1, 2, lambda a, b=0: math.hypot(a, b))
    env = Environment({}, {"hyp": hyp})
    assert env.call("hyp", [3, 4]) == 5.0
    assert env.call("hyp", [3]) == 3.0
    with pytest.raises(ArityError) as info:
        env.call("hyp", [1, 2, 3])
    assert info.value.expected == "1 to 2"


def test_builtin_validates_its_fields():
    with pytest.raises(ValueError):
        Builtin("bad name", 1, 1, abs)
    with pytest.raises(ValueError):
        Builtin("f", -1, None, abs)
    with pytest.raises(ValueError):
        Builtin("f", 2, 1, abs)
    with pytest.raises(TypeError):
        Builtin("f", 1, 1, "abs")
