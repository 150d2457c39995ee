"""Spark execution of plan units (spark_jobs.runner) on the session spark_jobs.session builds."""

from __future__ import annotations

import sys

from pydantic import BaseModel
from pyspark import cloudpickle
from pyspark.sql import SparkSession

from spark_jobs.runner import run_units


cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Echo(BaseModel):
    n: int


def whoami(unit: Echo) -> Echo:
    return Echo(n=unit.n)


def test_probe(spark: SparkSession) -> None:
    print(__name__, sys.modules.get(__name__))
    assert [r.n for r in run_units(spark, [Echo(n=i) for i in range(5)], whoami, Echo)] == list(range(5))
