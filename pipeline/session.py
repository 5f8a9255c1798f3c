"""The SparkSession: local mode unless spark-submit or `--master` chose something else.

`builder.master()` would override spark-submit's `--master`, so a master is set only when
not running under spark-submit (or when `--master` asks for one). Every session runs in
UTC (Spark hands Python naive datetimes in the session's zone) and overwrites Parquet
partitions dynamically (only those written).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOCAL_DEFAULT = "local[*]"
LOCAL_SETTINGS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
}
ALWAYS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
}


def get_spark(app_name: str, master: str | None = None) -> SparkSession:
    """Attach to the running session (tests, spark-submit) or start one."""
    # Workers must run this interpreter (the one with pyarrow), not the first python3 on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return _configured(active)
    builder = SparkSession.builder.appName(app_name)
    if master is not None or not launched_by_spark_submit():
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.master(master or os.environ.get("SPARK_MASTER", LOCAL_DEFAULT))
        for key, value in LOCAL_SETTINGS.items():
            builder = builder.config(key, value)
    for key, value in ALWAYS.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(os.environ.get("PIPELINE_SPARK_LOG_LEVEL", "ERROR"))
    return session


def launched_by_spark_submit() -> bool:
    """spark-submit starts the JVM first and hands Python its gateway port; plain Python
    (`msmq-gateway pipeline`) has none yet, and its master is this module's choice."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _configured(session: SparkSession) -> SparkSession:
    for key, value in ALWAYS.items():
        session.conf.set(key, value)
    return session
