"""`spark-submit pipeline/jobs/redrive.py ...`: as `msmq-gateway pipeline redrive ...`."""

from pipeline.cli import job_main

if __name__ == "__main__":
    job_main("redrive")
