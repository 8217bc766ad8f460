"""Load the exact tiktoken encoding offline, or explain how to provide it. Never downloads."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import tiktoken
import tiktoken.load

__all__ = ["EXACT_MODEL", "REPO_ROOT", "load_exact_encoding"]

#: The model whose counting both sides of every exact comparison use.
EXACT_MODEL: Final = "gpt-4o"
REPO_ROOT: Final = Path(__file__).resolve().parent.parent
#: A checkout's sibling folder of cached BPE files, used when TIKTOKEN_CACHE_DIR is unset.
_SIBLING_CACHE: Final = REPO_ROOT.parent / "shared" / "tiktoken_cache"

HELP: Final = (
    "Set TIKTOKEN_CACHE_DIR to a folder holding tiktoken's cached BPE files "
    "(o200k_base for gpt-4o, saved under the SHA-1 hex digest of its download URL, "
    "fb374d419588a4632f3f557e76b4b70aebbca790), e.g. "
    "`TIKTOKEN_CACHE_DIR=/path/to/tiktoken_cache python -m benchmarks`. "
    "The benchmark never downloads it."
)


class _DownloadBlockedError(RuntimeError):
    pass


@contextmanager
def _no_downloads() -> Iterator[None]:
    """Make tiktoken fail instead of fetching anything while an encoding loads."""
    original = tiktoken.load.read_file

    def local_only(blobpath: str) -> bytes:
        if "://" in blobpath:
            msg = f"not in the tiktoken cache, and this benchmark never downloads: {blobpath}"
            raise _DownloadBlockedError(msg)
        return original(blobpath)

    tiktoken.load.read_file = local_only
    try:
        yield
    finally:
        tiktoken.load.read_file = original


def load_exact_encoding(model: str = EXACT_MODEL) -> str | None:
    """Load ``model``'s encoding into tiktoken's registry; return why not, or None on success.

    Honours TIKTOKEN_CACHE_DIR; if it is unset and ``../shared/tiktoken_cache``
    exists beside the repository, points TIKTOKEN_CACHE_DIR there. Once loaded,
    the encoding is held by tiktoken, so TiktokenCounter and ChatOpenAI reuse it.
    """
    if "TIKTOKEN_CACHE_DIR" not in os.environ and _SIBLING_CACHE.is_dir():
        os.environ["TIKTOKEN_CACHE_DIR"] = str(_SIBLING_CACHE)
    try:
        with _no_downloads():
            tiktoken.encoding_for_model(model)
    except Exception as error:  # noqa: BLE001 - any failure means: skip the exact scenarios, and say why
        where = os.environ.get("TIKTOKEN_CACHE_DIR", "<unset>")
        return f"cannot load the {model} encoding (TIKTOKEN_CACHE_DIR={where}): {error}. {HELP}"
    return None
