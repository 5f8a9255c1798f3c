"""Every sample body under samples/ decodes to the JSON written beside it by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bodies import decode_body

SAMPLES = Path(__file__).parent / "samples"
NAMES = sorted(path.stem for path in SAMPLES.glob("*.json"))


def load(name: str) -> tuple[int, bytes, bytes, dict[str, Any]]:
    described = json.loads((SAMPLES / f"{name}.json").read_text(encoding="utf-8"))
    extension = SAMPLES / f"{name}.ext"
    return (
        described["body_type"],
        (SAMPLES / f"{name}.bin").read_bytes(),
        extension.read_bytes() if extension.exists() else b"",
        described["expected"],
    )


def test_every_body_has_its_expected_json() -> None:
    assert {path.stem for path in SAMPLES.glob("*.bin")} == set(NAMES)
    assert len(NAMES) >= 40


@pytest.mark.parametrize("name", NAMES)
def test_sample_decodes_to_its_expected_json(name: str) -> None:
    body_type, body, extension, expected = load(name)
    decoded = decode_body(body_type, body, extension).as_json()
    # The decoded value goes out as JSON: it must survive a round trip unchanged.
    assert json.loads(json.dumps(decoded)) == decoded
    for key, want in expected.items():
        if key == "reason_contains":
            assert want in (decoded["reason"] or ""), decoded["reason"]
        elif key == "warning_contains":
            assert any(want in warning for warning in decoded["warnings"]), decoded["warnings"]
        else:
            assert decoded[key] == want, key
