"""The shared domain and the worker runtime. Imports nothing from ``scheduler``."""

__version__ = "0.1.0"
