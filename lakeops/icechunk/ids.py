"""Object ids and sequence numbers in Crockford base32 (spec "Reference Files").

Two encodings share the alphabet ``0123456789ABCDEFGHJKMNPQRSTVWXYZ`` and use no padding:

* **bytes** (snapshot, manifest, chunk and attribute ids): 12 random bytes, packed 5 bits per
  character most significant bit first, as RFC 4648 does; 96 bits give 20 characters whose last
  character carries 4 zero bits (so real ids end in ``0`` or ``G``).
* **integers** (branch sequence file names): the number written in base 32, left-padded with ``0``.

Ids are validated strictly (canonical upper case, no Crockford aliases such as ``O`` or ``L``):
they are file names, and a lenient decoder would let two spellings name one object.
"""

from __future__ import annotations

import re
import secrets

from lakeops.errors import InvalidArgument

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
ID_BYTES = 12
ID_LENGTH = 20
_VALUES = {char: value for value, char in enumerate(ALPHABET)}


def encode_bytes(data: bytes) -> str:
    """``data`` as Crockford base32, 5 bits per character from the most significant bit."""
    bits = len(data) * 8
    chars = -(-bits // 5)
    number = int.from_bytes(data, "big") << (chars * 5 - bits)
    return encode_int(number, chars)


def decode_bytes(text: str) -> bytes:
    """The bytes :func:`encode_bytes` turned into ``text``.

    Raises :class:`~lakeops.errors.InvalidArgument` naming ``text`` for characters outside the
    alphabet, a length no byte string encodes to, or non-zero padding bits.
    """
    size = len(text) * 5 // 8
    spare = len(text) * 5 - size * 8
    if spare >= 5:
        raise InvalidArgument(f"{text!r} is not Crockford base32: {len(text)} characters encode no whole bytes")
    number = decode_int(text)
    if number & ((1 << spare) - 1):
        raise InvalidArgument(f"{text!r} is not canonical Crockford base32: its last {spare} padding bits are not 0")
    return (number >> spare).to_bytes(size, "big")


def encode_int(value: int, width: int) -> str:
    """``value`` in base 32, left-padded with ``0`` to ``width`` characters.

    Raises :class:`~lakeops.errors.InvalidArgument` if ``value`` is negative or needs more than
    ``width`` characters (a wider name would break the sorted-listing order of branch files).
    """
    if value < 0 or value >= 1 << (5 * width):
        raise InvalidArgument(f"{value} does not fit in {width} Crockford base32 characters")
    chars = []
    for _ in range(width):
        value, digit = divmod(value, 32)
        chars.append(ALPHABET[digit])
    return "".join(reversed(chars))


#: Exactly the alphabet's characters (upper case): ``int(..., 32)`` alone would also take lower case,
#: signs, underscores and surrounding white space.
_CANONICAL = re.compile(f"[{ALPHABET}]*")
#: Each Crockford digit spelled as the digit of the same value that ``int(..., 32)`` reads (0-9, A-V).
_AS_STANDARD = str.maketrans(ALPHABET, "0123456789ABCDEFGHIJKLMNOPQRSTUV")


def decode_int(text: str) -> int:
    """The number ``text`` writes in base 32; :class:`~lakeops.errors.InvalidArgument` on a bad character.

    Decoded by ``int`` once the characters are checked and respelled (a garbage collection decodes every
    object id of a repository: a loop per character took a third of it)."""
    if _CANONICAL.fullmatch(text) is None:
        char = next(c for c in text if c not in _VALUES)
        raise InvalidArgument(
            f"{text!r} is not Crockford base32: {char!r} is not in the alphabet {ALPHABET} (upper case)"
        )
    return int(text.translate(_AS_STANDARD), 32) if text else 0


def new_id() -> str:
    """A fresh object id: 12 random bytes, 20 characters."""
    return encode_bytes(secrets.token_bytes(ID_BYTES))


def validate_id(text: object, what: str = "object id") -> str:
    """``text`` if it is a well-formed 20-character id, else :class:`~lakeops.errors.InvalidArgument`.

    ``what`` names the id's role (``"snapshot id"``) in the message.
    """
    if not isinstance(text, str):
        raise InvalidArgument(f"{what} {text!r} is not a string")
    if len(text) != ID_LENGTH:
        raise InvalidArgument(f"{what} {text!r} has {len(text)} characters; ids have {ID_LENGTH}")
    try:
        decode_bytes(text)
    except InvalidArgument as exc:
        raise InvalidArgument(f"{what} {text!r} is invalid: {exc}") from None
    return text
