"""Fuzzing in the suite (bounded): random bodies, record soups built from [MS-NRBF]'s records,
and mutations of the sample corpus. No exception escapes, no internal error is caught by the
decoder's safety net, and every answer is JSON. `python -m bench.fuzz_bodies` runs 100,000."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.fuzz_bodies import BODY_TYPES, INTERNAL, run
from bodies import decode_body
from tests.bodies import nrbf_builder as nb

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check(body_type: int, body: bytes, extension: bytes = b"") -> None:
    decoded = decode_body(body_type, body, extension)
    assert INTERNAL not in (decoded.reason or ""), decoded.reason
    json.dumps(decoded.as_json())


@SETTINGS
@given(st.sampled_from((*BODY_TYPES, 1, 2, 4, 10)), st.binary(max_size=512), st.binary(max_size=128))
def test_random_bodies(body_type: int, body: bytes, extension: bytes) -> None:
    check(body_type, body, extension)


small = st.integers(min_value=-2, max_value=6)
names = st.sampled_from(["A", "System.Int32", "System.Guid", "x" * 300, ""])
member = st.tuples(
    names, st.integers(0, 8), st.sampled_from([b"", b"\x08", b"\x02", b"\x12", nb.lps("C") + nb.i32(2)])
)
record = st.one_of(
    st.builds(nb.string, small, names),
    st.builds(nb.reference, small),
    st.just(nb.NULL),
    st.builds(nb.nulls, st.integers(0, 300)),
    st.builds(nb.library, small, names),
    st.builds(nb.typed, st.integers(0, 19), st.binary(min_size=0, max_size=9)),
    st.builds(nb.class_with_members_and_types, small, names, st.lists(member, max_size=4), small),
    st.builds(nb.system_class_with_members_and_types, small, names, st.lists(member, max_size=4)),
    st.builds(nb.class_with_members, small, names, st.lists(names, max_size=3), small),
    st.builds(nb.class_with_id, small, small),
    st.builds(nb.array_single_object, small, small),
    st.builds(nb.array_single_string, small, small),
    st.builds(nb.array_single_primitive, small, st.integers(0, 19), st.binary(max_size=16), small),
    st.builds(
        nb.binary_array, small, st.integers(0, 6), st.lists(st.integers(0, 4), max_size=3), st.integers(0, 8),
        st.sampled_from([b"", b"\x08", nb.lps("S")]),
    ),
    st.binary(min_size=1, max_size=8),
)  # fmt: skip


@SETTINGS
@given(small, st.lists(record, max_size=24), st.booleans())
def test_nrbf_record_soups(root: int, records: list[bytes], end: bool) -> None:
    check(768, nb.header(root) + b"".join(records) + (nb.END if end else b""))


def test_corpus_mutations() -> None:
    figures = run(3000, seed=7, measure_memory=False)
    assert figures["internal_errors"] == 0
