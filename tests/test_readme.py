"""The README's self-contained examples run and print what their comments say."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_core_example_prints_what_it_says() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
    core = next(b for b in blocks if "trim_history(history" in b)
    promised = [line.split("# ", 1)[1] for line in core.splitlines() if "print(" in line]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(core, str(README), "exec"), {})  # noqa: S102 - the README's own example
    assert out.getvalue().splitlines() == promised
