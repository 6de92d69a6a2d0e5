"""Domain models shared by the scheduler and the workers (pydantic v2)."""

from pact_workers.models.contract import (
    ComponentContract,
    ContractFunction,
    ErrorCase,
    FieldSpec,
    FunctionContract,
    PerformanceBudget,
    SideEffect,
    SideEffectKind,
    TypeSpec,
    ValidatorSpec,
)
from pact_workers.models.environment import EnvironmentSpec
from pact_workers.models.testing import ContractTestSuite, TestCase, TestFailure, TestResults
from pact_workers.models.tree import DecompositionNode, DecompositionTree, load_tree
from pact_workers.models.work import (
    IN_FLIGHT,
    ROLE_FOR_PHASE,
    TERMINAL,
    ErrorClass,
    FailureNote,
    ItemStatus,
    Phase,
    ResultMessage,
    Role,
    TaskMessage,
    Usage,
    WorkItem,
)

__all__ = [
    "IN_FLIGHT",
    "ROLE_FOR_PHASE",
    "TERMINAL",
    "ComponentContract",
    "ContractFunction",
    "ContractTestSuite",
    "DecompositionNode",
    "DecompositionTree",
    "EnvironmentSpec",
    "ErrorCase",
    "ErrorClass",
    "FailureNote",
    "FieldSpec",
    "FunctionContract",
    "ItemStatus",
    "PerformanceBudget",
    "Phase",
    "ResultMessage",
    "Role",
    "SideEffect",
    "SideEffectKind",
    "TaskMessage",
    "TestCase",
    "TestFailure",
    "TestResults",
    "TypeSpec",
    "Usage",
    "ValidatorSpec",
    "WorkItem",
    "load_tree",
]
