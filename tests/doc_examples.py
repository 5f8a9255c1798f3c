"""The shell examples of a Markdown page, run in order in one bash against a real gateway, and
their outputs compared with the output blocks the page shows after them.

A page shows an example as a ```sh block, usually followed by its output (a ```json or plain
``` block). An output block may be shortened with `…` and may leave out whole lines; what it
shows must be there, in order. Values that differ on every run are not compared: GUIDs
(queue manager, message IDs), times, transaction, cursor and lock-tag tokens, durations.
base64 of 20 bytes (correlation IDs, which acknowledgments take from message IDs). Lookup
IDs, message ID sequence numbers, statuses, labels, bodies and counts are compared exactly.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

_FENCE = re.compile(r"^```(\w*)\s*$")
_MARK = "@@@doc-example@@@"

GUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_VOLATILE = [
    (re.compile(GUID), GUID),
    (
        re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?"),
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?",
    ),
    (re.compile(r"\b(?=[0-9a-f]*[a-f])[0-9a-f]{16,}\b"), r"[0-9a-f]{16,}"),
    (re.compile(r"\b\d+\.\d{3,}\b"), r"\d+\.\d+"),
    (re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{27}="), r"[A-Za-z0-9+/]{27}="),
]
"""Values that differ on every run -> the pattern that accepts any of them."""


@dataclass(frozen=True)
class Example:
    line: int
    """Line of the page where the ```sh block starts."""
    command: str
    expected: str | None
    """The output block that follows it, if any."""


def examples(page: Path) -> list[Example]:
    found: list[Example] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    index = 0
    blocks: list[tuple[int, str, str, int]] = []  # (start line, language, text, end index)
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        blocks.append((index + 1, opening.group(1), "\n".join(lines[index + 1 : end]), end))
        index = end + 1
    for position, (start, language, text, end) in enumerate(blocks):
        if language != "sh":
            continue
        following = blocks[position + 1] if position + 1 < len(blocks) else None
        adjacent = following is not None and following[1] != "sh" and following[0] == end + 2
        found.append(Example(start, text, following[2] if adjacent and following else None))
    return found


def pattern_of(expected_line: str) -> re.Pattern[str]:
    """An output line as a regular expression: `…` stands for anything, volatile values for any
    value of their kind."""
    parts = []
    for piece in expected_line.split("…"):
        spans: list[tuple[int, int, str]] = []
        for finder, replacement in _VOLATILE:
            for match in finder.finditer(piece):
                if not any(start < match.end() and match.start() < end for start, end, _ in spans):
                    spans.append((match.start(), match.end(), replacement))
        text, last = "", 0
        for start, end, replacement in sorted(spans):
            text += re.escape(piece[last:start]) + replacement
            last = end
        parts.append(text + re.escape(piece[last:]))
    return re.compile(".*".join(parts).rstrip())


def mismatch(expected: str, actual: str) -> str | None:
    """None when every non-empty expected line matches an actual line, in order."""
    shown = [line.rstrip() for line in actual.splitlines()]
    position = 0
    for line in expected.splitlines():
        if not line.strip():
            continue
        pattern = pattern_of(line)
        while position < len(shown) and not pattern.fullmatch(shown[position]):
            position += 1
        if position == len(shown):
            return f"no line matches {line!r} (in order)"
        position += 1
    return None


@dataclass(frozen=True)
class Outcome:
    example: Example
    output: str
    problem: str | None


def run(
    page: Path, replacements: dict[str, str], directory: Path, timeout_s: float, skip: tuple[int, ...] = ()
) -> list[Outcome]:
    """Run the page's examples in one bash, in order, in `directory`. `replacements`: text to
    substitute in the commands (the gateway's URL for the page's `http://127.0.0.1:8080`).
    `skip`: start lines of examples not to run (starting a server)."""
    chosen = [example for example in examples(page) if example.line not in skip]
    script = ["set +e"]
    for number, example in enumerate(chosen):
        command = example.command
        for old, new in replacements.items():
            command = command.replace(old, new)
        script += [f"printf '\\n%s %d\\n' '{_MARK}' {number}", command]
    done = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=directory,
        capture_output=True,
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
    )
    outputs = _split(done.stdout.decode(errors="replace"), len(chosen))
    outcomes = []
    for example, output in zip(chosen, outputs, strict=True):
        problem = None if example.expected is None else mismatch(example.expected, output)
        outcomes.append(Outcome(example, output, problem))
    return outcomes


def _split(stdout: str, count: int) -> list[str]:
    outputs = [""] * count
    current = None
    for line in stdout.splitlines(keepends=True):
        if line.startswith(_MARK):
            current = int(line.split()[1])
            continue
        if current is not None:
            outputs[current] += line
    return [output.removeprefix("\n") for output in outputs]
