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
    # INT64 microseconds marked UTC-adjusted (not Spark's default INT96, which has no zone):
    # pyarrow, pandas and Spark all read them as aware UTC times.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}
quiet_jvm = False
"""Set by `--quiet`: the JVM this process starts writes nothing to stderr (its start-up
banner and log4j lines would mail a cron job every night). Errors still reach Python."""


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
    session = _started(builder)
    session.sparkContext.setLogLevel(os.environ.get("PIPELINE_SPARK_LOG_LEVEL", "ERROR"))
    return session


def _started(builder: SparkSession.Builder) -> SparkSession:
    """Start the JVM; with `quiet_jvm` its stderr is /dev/null (it inherits ours at start)."""
    if not quiet_jvm or launched_by_spark_submit():
        return builder.getOrCreate()
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        return builder.getOrCreate()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def launched_by_spark_submit() -> bool:
    """spark-submit starts the JVM first and hands Python its gateway port; plain Python
    (`msmq-gateway pipeline`) has none yet, and its master is this module's choice."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _configured(session: SparkSession) -> SparkSession:
    for key, value in ALWAYS.items():
        session.conf.set(key, value)
    return session
