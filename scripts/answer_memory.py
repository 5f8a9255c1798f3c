"""Issue 18 item 7 measured by hand: a real gateway process holds COUNT messages of SIZE bytes;
browse them all, page after page, while /healthz is asked again and again, and report the
process's peak RSS during the browse (VmHWM, reset first) and the slowest /healthz.

    .venv/bin/python scripts/answer_memory.py [--count 100] [--size 4194304]
        [--answer-bytes 16777216] [--source DIR]

`--source` runs the gateway of another checkout (its `app` package, this venv's libraries), so
two versions can be compared on the same data shape. Linux only (/proc). Takes a minute or two.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.synchronize import Event
from pathlib import Path

import httpx

QUEUE = "private$/large"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--size", type=int, default=4 * 1024 * 1024)
    parser.add_argument("--answer-bytes", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--source", type=Path, default=Path(__file__).resolve().parent.parent)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        gateway = start(arguments, Path(directory))
        try:
            report(arguments, gateway)
        finally:
            gateway.terminate()
            gateway.process.wait(30)


def start(arguments: argparse.Namespace, directory: Path) -> Gateway:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    environment = {name: value for name, value in os.environ.items() if not name.startswith("MSMQGW_")}
    environment |= {
        "MSMQGW_DATABASE_URL": f"sqlite+aiosqlite:///{directory / 'answers.db'}",
        "MSMQGW_MAX_BODY_BYTES": str(arguments.size),
        "MSMQGW_MAX_ANSWER_BYTES": str(arguments.answer_bytes),
        "PYTHONPATH": str(arguments.source),
    }
    command = [sys.executable, "-m", "app.cli", "serve", "--host", "127.0.0.1", "--port", str(port)]
    log = (directory / "gateway.log").open("wb")
    process = subprocess.Popen(command, cwd=arguments.source, env=environment, stdout=log, stderr=log)
    gateway = Gateway(process, f"http://127.0.0.1:{port}")
    gateway.wait_ready()
    return gateway


@dataclass
class Gateway:
    process: subprocess.Popen[bytes]
    url: str

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)  # a start-up probe, not synchronisation
        raise SystemExit("the gateway did not start")

    def status(self, name: str) -> int:
        """A /proc/PID/status figure (kB)."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(name + ":"):
                return int(line.split()[1])
        raise KeyError(name)

    def reset_peak(self) -> None:
        Path(f"/proc/{self.process.pid}/clear_refs").write_text("5")  # VmHWM := VmRSS

    def terminate(self) -> None:
        self.process.terminate()


@dataclass
class Browse:
    pages: int = 0
    answer_bytes: int = 0
    largest_page: int = 0
    messages: int = 0


def report(arguments: argparse.Namespace, gateway: Gateway) -> None:
    with httpx.Client(base_url=gateway.url, timeout=600) as client:
        assert client.post("/api/queues", json={"path": QUEUE}).status_code == 201
        text = random.Random(7).choices(b"abcdefghijklmnopqrstuvwxyz 0123456789\n", k=arguments.size)
        body = bytes(text)  # text, as in the issue
        for number in range(arguments.count):
            sent = client.post(f"/api/queues/{QUEUE}/messages", content=body[:-8] + b"%08d" % number)
            assert sent.status_code == 201, sent.text
    idle = gateway.status("VmRSS")
    gateway.reset_peak()
    # The probes run in a process of their own: parsing a large page here holds this one's GIL.
    done = multiprocessing.Event()
    latencies: multiprocessing.SimpleQueue[list[float]] = multiprocessing.SimpleQueue()
    prober = multiprocessing.Process(target=probe, args=(gateway.url, done, latencies))
    prober.start()
    started = time.monotonic()
    try:
        result = browse(gateway.url)
    finally:
        done.set()
    elapsed = time.monotonic() - started
    probes = sorted(latencies.get())
    prober.join()
    print(f"source {arguments.source}")
    print(f"{arguments.count} messages of {arguments.size} bytes, cap {arguments.answer_bytes}")
    print(f"browse: {result.messages} messages, {result.pages} pages, {elapsed:.1f} s")
    print(f"answers {result.answer_bytes} bytes in all, the largest {result.largest_page}")
    print(f"RSS before the browse {idle // 1024} MiB, peak during it {gateway.status('VmHWM') // 1024} MiB")
    print(
        f"/healthz during the browse: {len(probes)} asked, median {probes[len(probes) // 2] * 1000:.0f} ms, ",
        end="",
    )
    print(f"slowest {probes[-1] * 1000:.0f} ms")


def probe(url: str, done: Event, latencies: multiprocessing.SimpleQueue[list[float]]) -> None:
    """/healthz, again and again until the browse is done (once after it at least)."""
    found: list[float] = []
    with httpx.Client(base_url=url, timeout=600) as client:
        while True:
            finished = done.is_set()
            asked = time.monotonic()
            assert client.get("/healthz").status_code == 200
            found.append(time.monotonic() - asked)
            if finished:
                break
    latencies.put(found)


def browse(url: str) -> Browse:
    result = Browse()
    with httpx.Client(base_url=url, timeout=600) as client:
        after: str | None = "0"
        while after is not None:
            answer = client.get(f"/api/queues/{QUEUE}/messages", params={"after": after, "limit": 100})
            assert answer.status_code == 200, answer.text
            page = answer.json()
            result.pages += 1
            result.answer_bytes += len(answer.content)
            result.largest_page = max(result.largest_page, len(answer.content))
            result.messages += len(page["messages"])
            after = page["next_after"]
    return result


if __name__ == "__main__":
    main()
