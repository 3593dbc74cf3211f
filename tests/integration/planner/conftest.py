"""One local[2] SparkSession for all planner integration tests (Spark start-up costs seconds)."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    from headwater.planner.spark_engine import spark_session

    existing = SparkSession.getActiveSession()
    session = (
        existing if existing is not None else spark_session("local[2]", {"spark.sql.shuffle.partitions": "2"})
    )
    yield session
    from pyspark import SparkContext

    # Another folder's session-scoped fixture may share this session and stop it first (the JVM
    # is gone then); stop it here only if it is still running.
    if existing is None and SparkContext._active_spark_context is not None:
        session.stop()
