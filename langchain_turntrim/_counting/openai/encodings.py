"""Which encoding an OpenAI model uses, and loading it within a bounded time: tiktoken
downloads a missing file without a timeout (a silent server hangs it forever), so
OpenAI's public encoding files are downloaded here, within a deadline and checked
against their SHA-256, into tiktoken's cache; never with ``TURNTRIM_OFFLINE=1``."""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Final

import tiktoken
import tiktoken.model
import tiktoken.registry

__all__ = ["EncodingUnavailableError", "encoding_name_for_model", "load_encoding"]

#: Prefixes ChatOpenAI maps to ``o200k_base`` when tiktoken does not know the name.
O200K_PREFIXES: Final = ("gpt-4o", "gpt-4.1", "gpt-5", "gpt-6")
OFFLINE_VARIABLE: Final = "TURNTRIM_OFFLINE"
TIMEOUT_VARIABLE: Final = "TURNTRIM_DOWNLOAD_TIMEOUT"
DEFAULT_DOWNLOAD_TIMEOUT: Final = 30.0

_HOST: Final = "https://openaipublic.blob.core.windows.net/"
#: The SHA-256 of each file tiktoken_ext.openai_public builds an encoding from.
_SHA256: Final = {
    "r50k_base": "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
    "p50k_base": "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
    "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
}
#: The encodings built from files of another name (as tiktoken_ext.openai_public has them).
_BUILT_FROM: Final = {
    "gpt2": ("vocab.bpe", "encoder.json"),
    "p50k_edit": ("p50k_base",),
    "o200k_harmony": ("o200k_base",),
}


def _files(name: str) -> list[tuple[str, str]]:
    """The (URL, SHA-256) of each file the public encoding ``name`` is built from."""
    files = _BUILT_FROM.get(name, (name,) if name in _SHA256 else ())
    path = "gpt-2/encodings/main/{}" if name == "gpt2" else "encodings/{}.tiktoken"
    return [(_HOST + path.format(file), _SHA256[file]) for file in files]


class EncodingUnavailableError(ValueError):
    """tiktoken could not load an encoding (usually: offline, file not cached).

    ``encoding`` names it, ``reason`` says why, and ``files`` holds the
    download URL and tiktoken's cache name of each file it is built from.
    """

    def __init__(self, encoding: str, reason: str) -> None:
        self.encoding = encoding
        self.reason = reason
        self.files = tuple((url, _cache_key(url)) for url, _ in _files(encoding))
        each = ", and ".join(
            f"the file downloaded from {url}, saved as {key}" for url, key in self.files
        )
        where = f" (for {encoding!r}: {each})" if each else ""
        super().__init__(
            f"tiktoken could not load the {encoding!r} encoding: {reason}. An encoding's BPE "
            f"file is downloaded on first use (within {TIMEOUT_VARIABLE} seconds, default "
            f"{DEFAULT_DOWNLOAD_TIMEOUT:g}; never with {OFFLINE_VARIABLE}=1); to count offline, "
            "either set the TIKTOKEN_CACHE_DIR environment variable to a folder holding that "
            "file under tiktoken's cache name, the SHA-1 hex digest of its download "
            f"URL{where}, or build the encoding from a local file and pass it in: "
            "TiktokenCounter(encoding=tiktoken.Encoding(name=..., pat_str=..., "
            "mergeable_ranks=tiktoken.load.load_tiktoken_bpe(path), special_tokens=...))."
        )


def encoding_name_for_model(model: str) -> str:
    """The encoding ChatOpenAI picks for ``model``, a fine-tune's by its base;
    ``ValueError`` naming the closest known names where ChatOpenAI would guess."""
    with contextlib.suppress(KeyError):
        return tiktoken.encoding_name_for_model(model)
    if model.lower().startswith(O200K_PREFIXES):
        return "o200k_base"
    base = model[3:].partition(":")[0] if model.startswith("ft:") else ""
    if base:  # ft:BASE:org:suffix:id
        with contextlib.suppress(ValueError):
            return encoding_name_for_model(base)
    known = {m for m, e in tiktoken.model.MODEL_TO_ENCODING.items() if e != "gpt2"}
    known.update(p.rstrip("-") for p in tiktoken.model.MODEL_PREFIX_TO_ENCODING if ":" not in p)
    close = difflib.get_close_matches(model.lower(), sorted(known | set(O200K_PREFIXES)), n=3)
    hint = f" (closest known: {', '.join(map(repr, close))})" if close else ""
    msg = (
        f"unknown OpenAI model {model!r}{hint}. TiktokenCounter knows the models tiktoken "
        f"maps, names starting with {', '.join(O200K_PREFIXES)}, and 'ft:' fine-tunes of "
        "those; for any other model pass its encoding instead, e.g. "
        "TiktokenCounter(encoding='o200k_base')."
    )
    raise ValueError(msg)


def load_encoding(name: str) -> tiktoken.Encoding:
    """The encoding ``name``, loaded within a bounded time or failing with
    ``EncodingUnavailableError`` saying how to provide it offline."""
    known = tiktoken.list_encoding_names()
    if name not in known:
        msg = f"unknown tiktoken encoding {name!r}; known encodings: {', '.join(known)}"
        raise ValueError(msg)
    if _files(name) and name not in tiktoken.registry.ENCODINGS:
        _ensure_cached(name)
    try:
        return tiktoken.get_encoding(name)
    except Exception as error:  # whatever tiktoken or a plugin raises
        raise EncodingUnavailableError(name, repr(error)) from error


def _offline() -> bool:
    return os.environ.get(OFFLINE_VARIABLE, "").strip().lower() in {"1", "true", "yes"}


def _cache_key(url: str) -> str:
    return hashlib.sha1(url.encode(), usedforsecurity=False).hexdigest()


def _ensure_cached(name: str) -> None:
    """Make sure tiktoken finds ``name``'s files in its cache (the folder
    ``tiktoken.load`` picks), or raise."""
    default = Path(tempfile.gettempdir()) / "data-gym-cache"
    cache = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR", default))
    if not cache:  # caching is off: tiktoken downloads the files itself
        if _offline():
            reason = f"{OFFLINE_VARIABLE} forbids downloads and caching is off"
            raise EncodingUnavailableError(name, reason)
        return
    folder = Path(cache)
    for url, sha256 in _files(name):
        path = folder / _cache_key(url)
        if _holds(path, sha256):
            continue
        if _offline():
            reason = f"{OFFLINE_VARIABLE} forbids downloads and the file is not in the cache"
            raise EncodingUnavailableError(name, reason)
        data = _download(name, url)
        if hashlib.sha256(data).hexdigest() != sha256:
            reason = f"the file downloaded from {url} does not match its SHA-256"
            raise EncodingUnavailableError(name, reason)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            temporary = path.with_name(f"{path.name}.{uuid.uuid4()}.tmp")
            temporary.write_bytes(data)
            temporary.replace(path)
        except OSError as error:
            reason = f"cannot save the downloaded file in tiktoken's cache {folder}: {error}"
            raise EncodingUnavailableError(name, reason) from error


def _holds(path: Path, sha256: str) -> bool:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() == sha256
    except OSError:
        return False


def _timeout() -> float:
    raw = os.environ.get(TIMEOUT_VARIABLE, "").strip()
    with contextlib.suppress(ValueError):
        seconds = float(raw) if raw else DEFAULT_DOWNLOAD_TIMEOUT
        if seconds > 0:  # also refuses nan
            return seconds
    msg = f"{TIMEOUT_VARIABLE} must be a number of seconds > 0, got {raw!r}"
    raise ValueError(msg)


def _open_url(url: str, *, timeout: float) -> Any:
    """Open ``url`` (tests replace this); urllib is slow to import and rarely needed."""
    import urllib.request  # noqa: PLC0415

    return urllib.request.urlopen(url, timeout=timeout)  # noqa: S310 - fixed https URLs


def _download(name: str, url: str) -> bytes:
    """The body at ``url``, one receive at a time: each socket operation waits at
    most the timeout and reading stops once it has passed, so it ends within
    about twice the timeout."""
    timeout = _timeout()
    deadline = time.monotonic() + timeout
    chunks: list[bytes] = []
    try:
        with _open_url(url, timeout=timeout) as response:
            read = getattr(response, "read1", None) or response.read
            while chunk := read(1 << 16):
                if time.monotonic() >= deadline:
                    raise TimeoutError  # noqa: TRY301 - said below, as any timeout
                chunks.append(chunk)
    except Exception as error:  # network errors of every kind, or blocked sockets
        if isinstance(error, TimeoutError) or time.monotonic() >= deadline:
            reason = f"downloading {url} did not finish within {timeout:g} s"
        else:
            reason = f"downloading {url} failed: {error!r}"
        raise EncodingUnavailableError(name, reason) from error
    return b"".join(chunks)
