"""Loading tiktoken encodings: from tiktoken's cache, else by a bounded download.

tiktoken downloads an encoding's BPE file on first use with no timeout, so a
network that accepts the connection but never answers makes it hang forever.
For OpenAI's public encodings, this module looks in tiktoken's cache first
(the same folder and file names tiktoken uses) and, when a file is missing,
downloads it itself within a deadline, checks its SHA-256 and saves it where
tiktoken reads it; tiktoken then loads it from the cache. (``gpt2`` has two
files, ``vocab.bpe`` and ``encoder.json``; every other public encoding one.) With
``TURNTRIM_OFFLINE=1`` nothing is ever downloaded.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Final

import tiktoken

from langchain_turntrim._safe_repr import safe_repr

__all__ = [
    "DEFAULT_DOWNLOAD_TIMEOUT",
    "OFFLINE_VARIABLE",
    "TIMEOUT_VARIABLE",
    "EncodingUnavailableError",
    "load_encoding",
]

#: Set to 1 (or true, yes) to forbid downloading encoding files.
OFFLINE_VARIABLE: Final = "TURNTRIM_OFFLINE"
#: Seconds a download of an encoding file may take in all.
TIMEOUT_VARIABLE: Final = "TURNTRIM_DOWNLOAD_TIMEOUT"
DEFAULT_DOWNLOAD_TIMEOUT: Final = 30.0

_URL: Final = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
# Each public encoding's file and its SHA-256, as tiktoken_ext.openai_public expects them.
_FILES: Final = {
    "r50k_base": ("r50k_base", "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"),
    "p50k_base": ("p50k_base", "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069"),
    "p50k_edit": ("p50k_base", "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069"),
    "cl100k_base": (
        "cl100k_base",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": (
        "o200k_base",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
    "o200k_harmony": (
        "o200k_base",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}
#: ``gpt2``'s two files (tiktoken's data-gym format) and their SHA-256.
_GPT2_URL: Final = "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/{}"
_GPT2_FILES: Final = (
    ("vocab.bpe", "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"),
    ("encoder.json", "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"),
)
_CHUNK: Final = 1 << 16


def _downloads(name: str) -> tuple[tuple[str, str], ...]:
    """The URL and SHA-256 of each file the public encoding ``name`` is loaded
    from (none for any other encoding)."""
    if name in _FILES:
        file, sha256 = _FILES[name]
        return ((_URL.format(file), sha256),)
    if name == "gpt2":
        return tuple((_GPT2_URL.format(file), sha256) for file, sha256 in _GPT2_FILES)
    return ()


def _open_url(url: str, timeout: float) -> Any:
    """Open ``url`` (a test replaces this); urllib is imported only to download."""
    import urllib.request  # noqa: PLC0415 - slow to import, and rarely needed

    return urllib.request.urlopen(url, timeout=timeout)  # noqa: S310 - tiktoken's https URLs


class EncodingUnavailableError(ValueError):
    """tiktoken could not load an encoding (usually: offline, file not cached).

    ``encoding`` names it, ``reason`` says why, and ``files`` holds the
    download URL and tiktoken's cache name of each file it is loaded from.
    """

    def __init__(
        self,
        message: str,
        encoding: str = "",
        reason: str = "",
        files: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(message)
        self.encoding = encoding
        self.reason = reason or message
        self.files = files


def load_encoding(name: str) -> tiktoken.Encoding:
    """The tiktoken encoding ``name``, loaded within a bounded time or failing with
    ``EncodingUnavailableError`` saying how to provide it offline."""
    known = tiktoken.list_encoding_names()
    if name not in known:
        shown = safe_repr(name, 80)
        msg = f"unknown tiktoken encoding {shown}; known encodings: {', '.join(known)}"
        raise ValueError(msg)
    if _downloads(name):
        _ensure_cached(name)
    try:
        return tiktoken.get_encoding(name)
    except Exception as exc:  # whatever tiktoken or a plugin raises
        raise _unavailable(name, repr(exc)) from exc


def downloads_forbidden() -> bool:
    return os.environ.get(OFFLINE_VARIABLE, "").strip().lower() in ("1", "true", "yes")


def _cache_dir() -> Path | None:
    """The folder tiktoken caches files in (as ``tiktoken.load`` picks it), or None
    when caching is turned off (``TIKTOKEN_CACHE_DIR=""``)."""
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if variable in os.environ:
            return Path(os.environ[variable]) if os.environ[variable] else None
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def _cache_key(url: str) -> str:
    return hashlib.sha1(url.encode(), usedforsecurity=False).hexdigest()


def _ensure_cached(name: str) -> None:
    """Make sure tiktoken will find ``name``'s files in its cache, or raise."""
    if name in getattr(tiktoken.registry, "ENCODINGS", {}):
        return  # loaded in this process already
    folder = _cache_dir()
    if folder is None:
        if downloads_forbidden():
            reason = f"{OFFLINE_VARIABLE} forbids downloads and caching is off"
            raise _unavailable(name, reason)
        return  # tiktoken downloads it itself, every time: the user turned caching off
    for url, sha256 in _downloads(name):
        _ensure_file(name, url, sha256, folder)


def _ensure_file(name: str, url: str, sha256: str, folder: Path) -> None:
    path = folder / _cache_key(url)
    if _holds(path, sha256):
        return
    if downloads_forbidden():
        reason = f"{OFFLINE_VARIABLE} forbids downloads and the file is not in the cache"
        raise _unavailable(name, reason)
    data = _download(url, _timeout())
    if hashlib.sha256(data).hexdigest() != sha256:
        reason = f"the file downloaded from {url} does not match its SHA-256"
        raise _unavailable(name, reason)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f"{path.name}.{uuid.uuid4()}.tmp")
        temporary.write_bytes(data)
        temporary.replace(path)
    except OSError as error:
        reason = f"cannot save the downloaded file in tiktoken's cache {folder}: {error}"
        raise _unavailable(name, reason) from error


def _holds(path: Path, sha256: str) -> bool:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == sha256
    except OSError:
        return False


def _timeout() -> float:
    raw = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    if not raw:
        return DEFAULT_DOWNLOAD_TIMEOUT
    try:
        seconds = float(raw)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        msg = f"{TIMEOUT_VARIABLE} must be a number of seconds > 0, got {raw!r}"
        raise ValueError(msg)
    return seconds


def _download(url: str, timeout: float) -> bytes:
    """The body at ``url``, or raise: every socket operation waits at most
    ``timeout`` seconds and the download stops once ``timeout`` has passed, so
    it ends within about twice ``timeout`` however slowly the server answers."""
    deadline = time.monotonic() + timeout
    try:
        with _open_url(url, timeout=timeout) as response:
            return _read_until(response, deadline)
    except Exception as error:  # network errors of every kind, or blocked sockets
        if isinstance(error, TimeoutError) or time.monotonic() >= deadline:
            reason = f"downloading {url} did not finish within {timeout:g} s"
        else:
            reason = f"downloading {url} failed: {safe_repr(error, 200)}"
        raise _unavailable(_name_of(url), reason) from error


def _read_until(response: Any, deadline: float) -> bytes:
    """The response's body, one receive at a time, or ``TimeoutError`` once
    ``deadline`` (a ``time.monotonic()``) has passed."""
    read = getattr(response, "read1", None) or response.read
    chunks: list[bytes] = []
    while True:
        if time.monotonic() >= deadline:
            raise TimeoutError
        chunk = read(_CHUNK)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _name_of(url: str) -> str:
    """The encoding a file downloaded from ``url`` belongs to."""
    names = (n for n in (*_FILES, "gpt2") if any(u == url for u, _ in _downloads(n)))
    return next(names, url)


def _unavailable(name: str, reason: str) -> EncodingUnavailableError:
    files = tuple((url, _cache_key(url)) for url, _ in _downloads(name))
    return EncodingUnavailableError(_instructions(name, reason, files), name, reason, files)


def _instructions(name: str, reason: str, files: tuple[tuple[str, str], ...]) -> str:
    where = ""
    if files:
        each = ", and ".join(
            f"the file downloaded from {url}, saved as {key}" for url, key in files
        )
        where = f" (for {name!r}: {each})"
    return (
        f"tiktoken could not load the {name!r} encoding: {reason}. An encoding's BPE "
        "file is downloaded on first use (within TURNTRIM_DOWNLOAD_TIMEOUT seconds, "
        f"default {DEFAULT_DOWNLOAD_TIMEOUT:g}; never with TURNTRIM_OFFLINE=1); to count "
        "offline, either set the TIKTOKEN_CACHE_DIR environment variable to a folder "
        "holding that file under tiktoken's cache name, the SHA-1 hex digest of its "
        f"download URL{where}, or build the encoding from a local file and pass it in: "
        "TiktokenCounter(encoding=tiktoken.Encoding(name=..., pat_str=..., "
        "mergeable_ranks=tiktoken.load.load_tiktoken_bpe(path), special_tokens=...))."
    )
