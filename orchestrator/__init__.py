"""Weave's Python processes: the orchestrator scan loop, the Pulse worker and the CLI.

Task handlers are written against this package: ``from orchestrator import handler, Retryable``.
"""

from .handlers import Retryable, TaskContext, handler

__all__ = ["Retryable", "TaskContext", "handler"]
