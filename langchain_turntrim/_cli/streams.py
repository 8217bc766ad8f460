"""The command's streams: its input read within a bound (``/dev/zero`` and an
endless pipe never end), its output written as UTF-8 whatever the locale."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path
from typing import BinaryIO, Final

__all__ = ["MAX_INPUT_BYTES", "read_file", "read_stdin", "write"]

#: The most bytes the command reads by default (``--max-input-bytes``).
MAX_INPUT_BYTES: Final = 256 * 1024 * 1024
_CHUNK: Final = 1 << 20


def read_file(path: str, max_bytes: int) -> bytes | None:
    with Path(path).open("rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size > max_bytes:  # a regular file, known too big before reading it
            return None
        return read_bounded(file, max_bytes)  # devices and pipes say 0


def read_stdin(max_bytes: int) -> bytes | None:
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is not None:
        return read_bounded(buffer, max_bytes)
    data = sys.stdin.read(max_bytes + 1).encode("utf-8")
    return None if len(data) > max_bytes else data


def read_bounded(stream: BinaryIO, max_bytes: int) -> bytes | None:
    """All of ``stream``, or None once it has given more than ``max_bytes``
    (``/dev/zero`` and an endless pipe never end)."""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = stream.read(min(_CHUNK, max_bytes + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            return None


def write(text: str) -> None:
    """UTF-8 to stdout whatever the locale: JSON is UTF-8 (RFC 8259)."""
    stream = sys.stdout
    buffer = getattr(stream, "buffer", None)
    if buffer is None:
        stream.write(text)
        return
    stream.flush()
    data = memoryview(text.encode("utf-8"))
    try:
        while data:  # a pipe may take part of it, then fail on the rest: never lose the error
            written = buffer.write(data)
            if not written:
                raise OSError(errno.EIO, "nothing written")  # noqa: TRY301 - worded below
            data = data[written:]
        buffer.flush()
    except BrokenPipeError:
        raise
    except OSError as error:
        msg = f"cannot write to stdout: {error.strerror or error}"
        raise OSError(msg) from error
