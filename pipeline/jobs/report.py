"""`spark-submit pipeline/jobs/report.py ...`: as `msmq-gateway pipeline report ...`."""

from pipeline.cli import job_main

if __name__ == "__main__":
    job_main("report")
