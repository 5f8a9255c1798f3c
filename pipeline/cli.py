"""`msmq-gateway pipeline <job> ...` and `spark-submit pipeline/jobs/<job>.py ...`: one parser.

Exit 0 on success, 2 on bad input or an unusable store or archive (found before any
change), 3 on a failure during the job (what was done is kept or rolled back as a whole).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from pipeline import times
from pipeline.errors import InjectedFailure, PipelineError
from pipeline.progress import ARCHIVE_STEPS, REDRIVE_STEPS, REPORT_STEPS, Progress
from pipeline.store import Store, store_url

EXIT_BAD_INPUT = 2
EXIT_FAILED = 3
JOBS = ("archive", "report", "redrive")
Handler = Callable[[Store, argparse.Namespace, Progress], str]


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parser().parse_args(argv)
    progress = Progress(arguments.job, arguments.fail_after, arguments.quiet)
    if arguments.quiet:
        from pipeline import session

        session.quiet_jvm = True
    try:
        store = Store(store_url(arguments.store))
    except PipelineError as error:
        return _fail(arguments.job, error, EXIT_BAD_INPUT)
    try:
        if arguments.master:
            from pipeline.session import get_spark

            get_spark(f"msmq-gateway {arguments.job}", arguments.master)
        handler: Handler = arguments.handler
        print(handler(store, arguments, progress), flush=True)
        return 0
    except (PipelineError, ValueError) as error:
        return _fail(arguments.job, error, EXIT_BAD_INPUT)
    except InjectedFailure as error:
        return _fail(arguments.job, error, EXIT_FAILED)
    except Exception as error:
        return _fail(arguments.job, error, EXIT_FAILED)
    finally:
        store.close()


def _fail(job: str, error: BaseException, status: int) -> int:
    print(f"msmq-gateway pipeline {job}: error: {error}", file=sys.stderr, flush=True)
    return status


def parser(prog: str = "msmq-gateway pipeline") -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog=prog, description="Archive, report on and redrive the message history")
    jobs = top.add_subparsers(dest="job", required=True, metavar="job")
    _archive_arguments(
        jobs.add_parser("archive", help="move old journal and dead-letter messages to Parquet")
    )
    _report_arguments(jobs.add_parser("report", help="per queue and day: arrivals, receives, dead letters"))
    _redrive_arguments(jobs.add_parser("redrive", help="select dead letters; with --execute, re-send them"))
    return top


def _common(job: argparse.ArgumentParser, steps: Sequence[str]) -> None:
    job.add_argument(
        "--store",
        help="the gateway's database URL (default: $MSMQGW_DATABASE_URL, else the default SQLite file)",
    )
    job.add_argument("--master", help="Spark master (default: spark-submit's, else local[*])")
    job.add_argument("--quiet", action="store_true", help="no progress lines")
    job.add_argument("--fail-after", choices=steps, help=argparse.SUPPRESS)


def _archive_arguments(job: argparse.ArgumentParser) -> None:
    _common(job, ARCHIVE_STEPS)
    job.add_argument("--archive", required=True, type=Path, help="archive directory (Parquet)")
    when = job.add_mutually_exclusive_group()
    when.add_argument("--older-than-days", type=int, default=30, help="cutoff: midnight UTC, N days ago")
    when.add_argument("--cutoff", help="cutoff as an ISO date-time (UTC when no zone is given)")
    job.add_argument(
        "--body", choices=("keep", "sha256"), default="keep", help="keep bodies or their SHA-256"
    )
    job.add_argument("--run-id", help="name of the run (default: from the cutoff; re-use it to resume)")
    job.add_argument(
        "--extract",
        choices=("adbc", "jdbc"),
        default="adbc",
        help="adbc: read on the driver (default); jdbc: Spark's JDBC source, PostgreSQL, for clusters",
    )
    job.add_argument(
        "--partitions", type=int, default=2, help="JDBC extract: lookup-ID ranges read in parallel"
    )
    job.set_defaults(handler=_archive)


def _archive(store: Store, arguments: argparse.Namespace, progress: Progress) -> str:
    from pipeline.archive import ArchiveOptions, run_archive

    if arguments.cutoff:
        cutoff = times.parse_moment(arguments.cutoff)
    else:
        if arguments.older_than_days < 0:
            raise PipelineError("--older-than-days must be 0 or more")
        cutoff = times.midnight_days_ago(arguments.older_than_days)
    if cutoff > times.now():
        raise PipelineError(f"the cutoff {cutoff.isoformat()} is in the future")
    archive = writable_directory(arguments.archive)
    if arguments.extract == "jdbc" and store.url.is_sqlite:
        raise PipelineError("--extract jdbc reads PostgreSQL only; SQLite is local-mode only (use adbc)")
    options = ArchiveOptions(
        archive, cutoff, arguments.body, arguments.run_id, arguments.extract, max(1, arguments.partitions)
    )
    return run_archive(store, options, progress)


def _report_arguments(job: argparse.ArgumentParser) -> None:
    _common(job, REPORT_STEPS)
    job.add_argument("--archive", type=Path, help="archive directory to include (runs completed there)")
    job.add_argument(
        "--out", required=True, type=Path, help="output directory: Parquet, report.json, report.html"
    )
    job.set_defaults(handler=_report)


def _report(store: Store, arguments: argparse.Namespace, progress: Progress) -> str:
    from pipeline.report import run_report

    archive = _existing_archive(arguments.archive)
    return run_report(store, archive, writable_directory(arguments.out), progress)


def _redrive_arguments(job: argparse.ArgumentParser) -> None:
    _common(job, REDRIVE_STEPS)
    job.add_argument("--archive", type=Path, help="archive directory: include archived dead letters")
    job.add_argument("--manifest", required=True, type=Path, help="manifest directory (Parquet)")
    job.add_argument(
        "--class", dest="classes", action="append", default=[], help="message class: name or hex"
    )
    job.add_argument("--queue", help="original queue (path name, e.g. private$\\orders)")
    job.add_argument("--since", help="dead-lettered at or after (ISO date-time)")
    job.add_argument("--until", help="dead-lettered before (ISO date-time)")
    job.add_argument("--label", help="regular expression the label must match")
    job.add_argument("--source-machine", help="GUID of the sending machine")
    job.add_argument(
        "--execute", action="store_true", help="stage the selected messages for the gateway to re-send"
    )
    job.add_argument("--to", help="send to this queue instead of each message's original queue")
    job.add_argument(
        "--gateway",
        help="base URL of a gateway on this store (http://127.0.0.1:8080): have it re-send the batch "
        "now and wait (default: its background pass does, within MSMQGW_REDRIVE_INTERVAL_S)",
    )
    job.add_argument(
        "--time-to-be-received",
        type=int,
        help="seconds, for the re-sent messages (default: each one's original)",
    )
    job.set_defaults(handler=_redrive)


def _redrive(store: Store, arguments: argparse.Namespace, progress: Progress) -> str:
    from pipeline.redrive import RedriveOptions, run_redrive

    if arguments.gateway and not arguments.gateway.startswith(("http://", "https://")):
        raise PipelineError(f"--gateway {arguments.gateway!r} is not an http:// or https:// URL")
    if arguments.time_to_be_received is not None and not 0 < arguments.time_to_be_received <= 0xFFFFFFFF:
        raise PipelineError("--time-to-be-received must be 1 to 4294967295 seconds")
    options = RedriveOptions(
        archive=_existing_archive(arguments.archive),
        manifest=writable_directory(arguments.manifest),
        classes=tuple(arguments.classes),
        queue=arguments.queue,
        since=times.parse_moment(arguments.since) if arguments.since else None,
        until=times.parse_moment(arguments.until) if arguments.until else None,
        label=arguments.label,
        source_machine=arguments.source_machine,
        execute=arguments.execute,
        target=arguments.to,
        gateway=arguments.gateway,
        time_to_be_received=arguments.time_to_be_received,
    )
    return run_redrive(store, options, progress)


def writable_directory(path: Path) -> Path:
    """Create the directory if needed and prove it takes files, before any change is made."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-"):
            pass
    except OSError as error:
        raise PipelineError(f"{path} is not a writable directory: {error.strerror or error}") from None
    return path.resolve()


def _existing_archive(path: Path | None) -> Path | None:
    if path is None:
        return None
    if not path.is_dir() or not os.access(path, os.R_OK):
        raise PipelineError(f"no archive directory at {path}")
    return path.resolve()


def job_main(job: str) -> None:
    """Entry point of `spark-submit pipeline/jobs/<job>.py ...`: the same arguments."""
    sys.exit(main([job, *sys.argv[1:]]))


if __name__ == "__main__":
    sys.exit(main())
