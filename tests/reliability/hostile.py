"""Shared machinery of the hostile-input tests: the example budget, the invariant, and mutations.

The invariant of issue 10 ("Hostile and broken input"): a parser fed any bytes returns a result or
raises a :class:`~lakeops.errors.LakeopsError` subclass with a message; no other exception type, and
no hang. :func:`must_hold` checks exactly that for one call, with a wall-clock limit per call (a
``SIGALRM``), since hypothesis's own deadline only reports slow examples after they finish.

Budget: each property runs :data:`EXAMPLES` examples, 25 by default so the whole folder stays well
inside the default suite's time; ``LAKEOPS_FUZZ_EXAMPLES=2000`` (what ``make test-reliability``
sets) searches much further. Hypothesis keeps found failures in its example database and replays
them first on the next run.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from lakeops.errors import LakeopsError

#: Examples per property; raise it with ``LAKEOPS_FUZZ_EXAMPLES`` for a long search.
EXAMPLES = int(os.environ.get("LAKEOPS_FUZZ_EXAMPLES", "25"))
#: Seconds one parser call may take before it counts as a hang.
CALL_LIMIT_S = int(os.environ.get("LAKEOPS_FUZZ_CALL_LIMIT", "20"))

#: The settings of every fuzz property: no per-example deadline (a loaded 2-CPU CI box would make it
#: flaky; :func:`must_hold` catches real hangs instead), and fixtures built once per test are fine.
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)

T = TypeVar("T")


class Hang(AssertionError):
    """A parser call ran past :data:`CALL_LIMIT_S`."""


@contextmanager
def _time_limit(seconds: int, what: str) -> Iterator[None]:
    def _expired(signum: int, frame: FrameType | None) -> None:
        raise Hang(f"{what} did not finish within {seconds} s on hostile input")

    previous = signal.signal(signal.SIGALRM, _expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def must_hold(call: Callable[[], T], what: str) -> T | LakeopsError:
    """The result of ``call()``, or the :class:`LakeopsError` it raised (which must carry a message).

    Any other exception propagates and fails the test: it is a parser bug on hostile input.
    """
    with _time_limit(CALL_LIMIT_S, what):
        try:
            return call()
        except LakeopsError as exc:
            assert str(exc).strip(), f"{what}: {type(exc).__name__} without a message"
            return exc


def names(error: object, *fragments: str) -> bool:
    """Whether an error's message names every fragment (a file name, usually)."""
    return isinstance(error, LakeopsError) and all(f in str(error) for f in fragments)


# -- strategies ------------------------------------------------------------------------------------

#: JSON scalars a hostile writer might put anywhere: wrong types, huge and negative numbers, odd text.
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 1, 2**31, 2**63 - 1, 2**63, 2**64, -(2**63)]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
    st.sampled_from(["", "../outside", "/etc/passwd", "s3://other/x", "%zz", "\x00", "NaN", "1e999", "u", "i", "p"]),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every location (keys and indexes from the top) inside a decoded JSON/MessagePack tree."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _replace(value: Any, path: tuple[Any, ...], new: Any, *, drop: bool) -> Any:
    """A copy of ``value`` with the node at ``path`` replaced by ``new`` (or removed, if ``drop``)."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        out = dict(value)
        if drop and not rest:
            out.pop(head, None)
        else:
            out[head] = _replace(value[head], rest, new, drop=drop)
        return out
    items = list(value)
    if drop and not rest:
        del items[head]
    else:
        items[head] = _replace(items[head], rest, new, drop=drop)
    return tuple(items) if isinstance(value, tuple) else items


@st.composite
def mutated_tree(draw: st.DrawFn, tree: Any, values: st.SearchStrategy[Any] = json_values) -> Any:
    """``tree`` with one to three nodes replaced by hostile values or removed."""
    for _ in range(draw(st.integers(1, 3))):
        locations = list(_paths(tree))
        path = draw(st.sampled_from(locations))
        drop = bool(path) and draw(st.booleans())
        tree = _replace(tree, path, None if drop else draw(values), drop=drop)
    return tree


@st.composite
def mutated_bytes(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` truncated, with bytes flipped, inserted or deleted: what a torn or rotten write leaves."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["truncate", "flip", "insert", "delete", "zero"]))
        at = draw(st.integers(0, max(len(out) - 1, 0)))
        if kind == "truncate":
            del out[at:]
        elif kind == "flip" and out:
            out[at] ^= draw(st.integers(1, 255))
        elif kind == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del out[at : at + draw(st.integers(1, 16))]
        elif out:
            end = at + draw(st.integers(1, 64))
            out[at:end] = bytes(len(out[at:end]))
    return bytes(out)


def json_bytes(value: Any) -> bytes:
    """Compact JSON as writers produce it (non-finite floats cannot occur: the strategies exclude them)."""
    return json.dumps(value, separators=(",", ":")).encode()


#: Pathological but small documents every JSON parser is fed: deep nesting, huge numbers, odd text.
NASTY_JSON = [
    b"",
    b"\xff\xfe",
    b"[" * 100_000,
    b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    b"1" * 5000,
    b"1e999999",
    b"NaN",
    b'"\\ud800"',
    b"null",
    b"[]",
    b"{}",
]
