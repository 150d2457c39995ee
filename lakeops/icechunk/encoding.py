"""The MessagePack layer shared by snapshot and manifest files (spec "File Formats").

Seed-format files are plain MessagePack of Rust structs serialised by ``rmp-serde``: no header, no
compression; structs are arrays of their fields in declaration order, enums are externally tagged
(``"Group"`` for a unit variant, ``{"Array": payload}`` otherwise), ``Option::None`` is nil, byte
buffers are bin, ids are their 20-character strings, timestamps chrono's RFC 3339 text.

Decoding goes through :class:`Decoder`, whose checks name the file and the field, so a damaged
file surfaces as :class:`~lakeops.errors.CorruptFile` rather than a ``KeyError`` deep inside.
Encoding goes through :func:`pack`, which differs from ``msgpack.packb`` in one way: a
:class:`Single` is written as a 32-bit float, as Rust writes an ``f32`` (fill values of ``float32``
arrays); Python floats are 64-bit. Every other choice (smallest int, str8, bin) already matches
``rmp-serde``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NoReturn

import msgpack

from lakeops.errors import CorruptFile, InvalidArgument, UnsupportedFeature
from lakeops.icechunk.ids import validate_id

#: Icechunk 1.x files start with this header; the seed format has none.
MAGIC_1X = "ICE🧊CHUNK".encode()

_RFC3339 = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)")


@dataclass(frozen=True, slots=True)
class Single:
    """A float Rust stores as ``f32``: encoded as a MessagePack float 32."""

    value: float


def unpack(data: bytes, path: str, what: str) -> Any:
    """Decode a whole file: maps with array keys become dicts with tuple keys, arrays tuples.

    Raises :class:`~lakeops.errors.UnsupportedFeature` for an Icechunk 1.x file and
    :class:`~lakeops.errors.CorruptFile` naming ``path`` for truncated or malformed MessagePack.
    """
    if data.startswith(MAGIC_1X):
        version = data[36] if len(data) > 36 else "?"
        raise UnsupportedFeature(
            f"{path}: {what} is in the Icechunk 1.x binary format (header ICE🧊CHUNK, spec version {version}); "
            "only the seed format (plain MessagePack, Icechunk 0.1.0-alpha) is supported"
        )
    try:
        return msgpack.unpackb(data, raw=False, use_list=False, strict_map_key=False)
    except (msgpack.UnpackException, ValueError, TypeError) as exc:
        raise CorruptFile(f"{path}: {what} is not valid MessagePack ({type(exc).__name__}: {exc})") from exc


class Decoder:
    """Typed access to decoded MessagePack values; every failure names the file and the field."""

    def __init__(self, path: str, what: str) -> None:
        self.path = path
        self.what = what

    def fail(self, where: str, problem: str) -> NoReturn:
        raise CorruptFile(f"{self.path}: {self.what} field {where}: {problem}")

    def array(self, value: Any, where: str, length: int | None = None) -> tuple[Any, ...]:
        if not isinstance(value, tuple):
            self.fail(where, f"expected an array, got {type(value).__name__}")
        if length is not None and len(value) != length:
            self.fail(where, f"expected an array of {length} elements, got {len(value)}")
        return value

    def map(self, value: Any, where: str) -> dict[Any, Any]:
        if not isinstance(value, dict):
            self.fail(where, f"expected a map, got {type(value).__name__}")
        return value

    def integer(self, value: Any, where: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(where, f"expected an integer, got {value!r}")
        return value

    def text(self, value: Any, where: str) -> str:
        if not isinstance(value, str):
            self.fail(where, f"expected a string, got {value!r}")
        return value

    def binary(self, value: Any, where: str) -> bytes:
        if not isinstance(value, bytes):
            self.fail(where, f"expected binary data, got {type(value).__name__}")
        return value

    def object_id(self, value: Any, where: str, role: str) -> str:
        try:
            return validate_id(value, role)
        except InvalidArgument as exc:
            self.fail(where, str(exc))

    def integers(self, value: Any, where: str) -> tuple[int, ...]:
        return tuple(self.integer(v, f"{where}[{i}]") for i, v in enumerate(self.array(value, where)))

    def variant(self, value: Any, where: str) -> tuple[str, Any]:
        """An externally tagged enum: ``("Name", None)`` for ``"Name"``, ``("Name", x)`` for ``{"Name": x}``."""
        if isinstance(value, str):
            return value, None
        if isinstance(value, dict) and len(value) == 1:
            ((name, payload),) = value.items()
            if isinstance(name, str):
                return name, payload
        self.fail(where, f"expected an enum variant (a name or a one-entry map), got {value!r}")

    def timestamp(self, value: Any, where: str) -> datetime:
        try:
            return parse_timestamp(self.text(value, where))
        except InvalidArgument as exc:
            self.fail(where, str(exc))

    def version(self, value: Any, supported: int) -> int:
        version = self.integer(value, "format version")
        if version != supported:
            raise UnsupportedFeature(
                f"{self.path}: {self.what} format version {version} is not supported (only {supported})"
            )
        return version


def json_value(value: Any) -> Any:
    """A decoded JSON-like value (attributes, properties, flags) with arrays as lists again."""
    if isinstance(value, tuple):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: json_value(v) for k, v in value.items()}
    return value


def parse_timestamp(text: str) -> datetime:
    """chrono's RFC 3339 form (``2024-10-13T18:53:45.425022Z``) as an aware UTC datetime.

    Python keeps microseconds: digits beyond the sixth are dropped.
    """
    match = _RFC3339.fullmatch(text)
    if match is None:
        raise InvalidArgument(f"{text!r} is not an RFC 3339 timestamp")
    base, fraction, zone = match.groups()
    micros = int((fraction or "0")[:6].ljust(6, "0"))
    try:  # the pattern admits month 13, hour 25, ...: the calendar decides
        parsed = datetime.fromisoformat(base + ("+00:00" if zone == "Z" else zone))
        return (parsed + timedelta(microseconds=micros)).astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise InvalidArgument(f"{text!r} is not a valid timestamp ({exc})") from None


def format_timestamp(value: datetime) -> str:
    """chrono's ``to_rfc3339_opts(AutoSi, use_z=true)``: 0, 3 or 6 fraction digits, ``Z``."""
    if value.tzinfo is None:
        raise InvalidArgument(f"timestamp {value} has no time zone")
    utc = value.astimezone(UTC)
    micros = utc.microsecond
    if micros == 0:
        fraction = ""
    elif micros % 1000 == 0:
        fraction = f".{micros // 1000:03d}"
    else:
        fraction = f".{micros:06d}"
    return utc.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"


def pack(value: Any) -> bytes:
    """MessagePack bytes of ``value`` (tuples and lists as arrays, dicts in their own order),
    with :class:`Single` values as float 32."""
    out: list[bytes] = []
    # Fresh packers per call: a Packer keeps an internal buffer and is not meant to be shared.
    _pack_into(value, out, msgpack.Packer(use_bin_type=True), msgpack.Packer(use_single_float=True))
    return b"".join(out)


def _pack_into(value: Any, out: list[bytes], double: msgpack.Packer, single: msgpack.Packer) -> None:
    if isinstance(value, Single):
        out.append(single.pack(value.value))
    elif isinstance(value, list | tuple):
        out.append(double.pack_array_header(len(value)))
        for item in value:
            _pack_into(item, out, double, single)
    elif isinstance(value, Mapping):
        out.append(double.pack_map_header(len(value)))
        for key, item in value.items():
            _pack_into(key, out, double, single)
            _pack_into(item, out, double, single)
    else:
        out.append(double.pack(value))
