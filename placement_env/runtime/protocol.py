"""Message framing between the measured runtime and its driver process (both directions).

One message is a 4-byte big-endian header length (:data:`LENGTH`), a UTF-8 JSON header, then
``header["payload_len"]`` raw bytes (0 if absent). The parent (:mod:`.driver`) reads its answers
without blocking against a deadline, so it unpacks :data:`LENGTH` from its own buffer; the driver
(:mod:`.local_driver`) reads its requests with :func:`read_message`, which blocks.
"""
from __future__ import annotations

import json
import struct
from typing import BinaryIO

LENGTH = struct.Struct(">I")  # the header's length in bytes, before the header
MAX_HEADER = 64 * 2**20  # a longer header means the reader lost its place in the stream


def encode(header: dict, payload: bytes = b"") -> bytes:
    """One framed message: ``header`` (plus its ``payload_len``) and ``payload``."""
    header = dict(header, payload_len=len(payload))
    data = json.dumps(header).encode()
    return LENGTH.pack(len(data)) + data + payload


def _read_exact(stream: BinaryIO, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = stream.read(n - got)
        if not chunk:
            raise EOFError("stream closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_message(stream: BinaryIO) -> tuple[dict, bytes]:
    """The next (header, payload) from a blocking binary stream; EOFError when it closes."""
    (length,) = LENGTH.unpack(_read_exact(stream, LENGTH.size))
    if length > MAX_HEADER:
        raise ValueError(f"header of {length} bytes: protocol out of sync")
    header = json.loads(_read_exact(stream, length))
    payload = _read_exact(stream, int(header.get("payload_len", 0)))
    return header, payload
