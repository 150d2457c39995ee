"""Crockford base32 ids and sequence numbers (spec "Reference Files")."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from lakeops.errors import InvalidArgument
from lakeops.icechunk.ids import (
    ALPHABET,
    decode_bytes,
    decode_int,
    encode_bytes,
    encode_int,
    new_id,
    validate_id,
)

_RFC4648 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


def _oracle(data: bytes) -> str:
    """RFC 4648 base32 (same bit packing) re-spelled in the Crockford alphabet, padding removed."""
    return base64.b32encode(data).decode().rstrip("=").translate(str.maketrans(_RFC4648, ALPHABET))


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 5, 11, 12, 13, 32])
def test_byte_encoding_matches_rfc4648_bit_packing(size: int) -> None:
    for _ in range(20):
        data = os.urandom(size)
        text = encode_bytes(data)
        assert text == _oracle(data)
        assert decode_bytes(text) == data


def test_known_values() -> None:
    assert encode_bytes(bytes(12)) == "0" * 20
    assert encode_bytes(b"\xff" * 12) == "Z" * 19 + "G"  # the last character carries 4 zero bits
    assert encode_int(0, 8) == "00000000"
    assert encode_int(2**40 - 1, 8) == "ZZZZZZZZ"
    assert encode_int(1099511627775 - 100, 8) == "ZZZZZZWV"
    assert decode_int("ZZZZZZWV") == 1099511627675


def test_every_id_in_the_test_repository_decodes_to_12_bytes_and_back(test_repo: Path) -> None:
    names = [p.name for d in ("snapshots", "manifests", "chunks") for p in (test_repo / d).iterdir()]
    assert len(names) == 14
    for name in names:
        assert validate_id(name) == name
        raw = decode_bytes(name)
        assert len(raw) == 12
        assert encode_bytes(raw) == name


def test_new_ids_are_valid_and_distinct() -> None:
    ids = {new_id() for _ in range(1000)}
    assert len(ids) == 1000
    for value in ids:
        assert len(value) == 20 and set(value) <= set(ALPHABET)
        assert validate_id(value) == value


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        ("WT2Z2GQ09G0RTAEQ3D7", "has 19 characters"),
        ("WT2Z2GQ09G0RTAEQ3D700", "has 21 characters"),
        ("", "has 0 characters"),
        ("WT2Z2GQ09G0RTAEQ3DO0", "'O' is not in the alphabet"),  # Crockford alias of 0: not canonical
        ("WT2Z2GQ09G0RTAEQ3DI0", "'I' is not in the alphabet"),
        ("WT2Z2GQ09G0RTAEQ3DU0", "'U' is not in the alphabet"),
        ("wt2z2gq09g0rtaeq3d70", "'w' is not in the alphabet"),
        ("WT2Z2GQ09G0RTAEQ3D7-", "'-' is not in the alphabet"),
        # What int(..., 32) would take: a sign, an underscore, white space.
        ("+WT2Z2GQ09G0RTAEQ3D0", "'\\+' is not in the alphabet"),
        ("WT2Z2GQ09G0RTAEQ3D_0", "'_' is not in the alphabet"),
        (" WT2Z2GQ09G0RTAEQ3D0", "' ' is not in the alphabet"),
        ("WT2Z2GQ09G0RTAEQ3D71", "padding bits are not 0"),
    ],
)
def test_bad_ids_are_refused_naming_the_id(bad: str, problem: str) -> None:
    with pytest.raises(InvalidArgument, match=problem) as info:
        validate_id(bad, "snapshot id")
    assert f"snapshot id {bad!r}" in str(info.value)


def test_non_string_id_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="is not a string"):
        validate_id(42)


def test_integer_out_of_range_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="does not fit"):
        encode_int(2**40, 8)
    with pytest.raises(InvalidArgument, match="does not fit"):
        encode_int(-1, 8)


def test_integers_decode_as_the_positional_sum_of_their_digits() -> None:
    """Every character at every position: ``decode_int`` reads what the alphabet's digits spell."""
    for width in range(1, 14):
        text = "".join(ALPHABET[(i * 7 + width) % 32] for i in range(width))
        assert decode_int(text) == sum(ALPHABET.index(c) * 32 ** (width - 1 - i) for i, c in enumerate(text))
    assert decode_int("") == 0
