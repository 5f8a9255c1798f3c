"""`spark-submit pipeline/jobs/archive.py ...`: as `msmq-gateway pipeline archive ...`."""

from pipeline.cli import job_main

if __name__ == "__main__":
    job_main("archive")
