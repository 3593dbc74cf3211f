"""``headwater demo``: the seeds' story told on a local cluster (story.py)."""

from headwater.demo.story import run_demo

__all__ = ["run_demo"]
