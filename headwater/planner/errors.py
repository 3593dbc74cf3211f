"""The planner's one error type: a message for the operator, never a traceback."""

from __future__ import annotations


class PlannerError(Exception):
    """Bad input or an impossible request. The message names the problem; no plan is produced."""
