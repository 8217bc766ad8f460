"""Small helpers every test module shares: records, running a coroutine, snapshots,
the command line in-process and in a subprocess."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import subprocess
import sys
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage

from langchain_turntrim._safe_repr import safe_repr

T = TypeVar("T")


def rec(ident: str, role: Any, tokens: Any) -> dict[str, Any]:
    """A plain trim record; ``role`` and ``tokens`` may be anything, to test bad input."""
    return {"id": ident, "role": role, "tokens": tokens}


def arun(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from synchronous test code."""
    return asyncio.run(coroutine)


def snapshot(value: object) -> object:
    """A deep copy of ``value`` to compare with later, to prove an input was not mutated.

    Messages by class and ``model_dump()``, lists and tuples item by item,
    mappings by deep copy, anything else by ``repr`` (``safe_repr``).
    """
    if isinstance(value, BaseMessage):
        # Fields reassigned to odd values are compared as they are, unserialised.
        return (type(value), value.model_dump(warnings=False))
    if isinstance(value, (list, tuple)):
        return (type(value), [snapshot(item) for item in value])
    if isinstance(value, Mapping):
        return (type(value), copy.deepcopy(dict(value)))
    return safe_repr(value)  # never raises, whatever the value's own __repr__ does


def run_cli(capsys: Any, *args: str) -> tuple[int, str, str]:
    """``turntrim ARGS`` in-process: the exit status, stdout and stderr."""
    from langchain_turntrim._cli import main

    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write_json(tmp_path: Path, name: str, data: Any) -> str:
    """``data`` as JSON (non-ASCII kept) in ``tmp_path / name``; returns the path."""
    path = tmp_path / name
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return str(path)


def run_python(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in a fresh process (no forced colours), with ``stdin``."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    return subprocess.run(
        [sys.executable, *args],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        timeout=60,
        check=False,
    )
