"""Executors: where attempts run. ``local`` (in-process pool); ``celery`` later."""

from scheduler.executors.base import Executor
from scheduler.executors.local import LocalExecutor

__all__ = ["Executor", "LocalExecutor"]
