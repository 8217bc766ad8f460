"""Where the benchmark's files are, and the exact counter, loaded offline (never downloads)."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Final

from langchain_turntrim import EncodingUnavailableError, TiktokenCounter

__all__ = ["DATA", "EXACT_MODEL", "REPO_ROOT", "exact_counter", "exact_problem"]

#: The model whose counting every exact comparison uses (o200k_base).
EXACT_MODEL: Final = "gpt-4o"
REPO_ROOT: Final = Path(__file__).resolve().parent.parent
#: Recorded conversations beside the checkout (optional: the generator is the default).
DATA: Final = REPO_ROOT.parent / "shared" / "data"
#: A checkout's sibling folder of cached BPE files, used when TIKTOKEN_CACHE_DIR is unset.
_SIBLING_CACHE: Final = REPO_ROOT.parent / "shared" / "tiktoken_cache"
HELP: Final = (
    "Set TIKTOKEN_CACHE_DIR to a folder holding tiktoken's cached BPE files "
    "(o200k_base for gpt-4o, saved under the SHA-1 hex digest of its download URL, "
    "fb374d419588a4632f3f557e76b4b70aebbca790). The benchmark never downloads it."
)


def _offline() -> None:
    """Point tiktoken at the sibling cache (when TIKTOKEN_CACHE_DIR is unset) and
    forbid downloads (``TURNTRIM_OFFLINE=1``, unless set otherwise)."""
    if "TIKTOKEN_CACHE_DIR" not in os.environ and _SIBLING_CACHE.is_dir():
        os.environ["TIKTOKEN_CACHE_DIR"] = str(_SIBLING_CACHE)
    os.environ.setdefault("TURNTRIM_OFFLINE", "1")


@functools.cache
def exact_problem() -> str | None:
    """Why the exact counter cannot be built offline, or None when it can."""
    _offline()
    try:
        TiktokenCounter(EXACT_MODEL)
    except EncodingUnavailableError as error:
        return f"{error} {HELP}"
    return None


@functools.cache
def exact_counter() -> TiktokenCounter:
    """The one exact counter (counters are immutable: trimmers may share it)."""
    _offline()
    return TiktokenCounter(EXACT_MODEL)
