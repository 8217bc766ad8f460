"""The sdist holds what running the tests needs, and the metadata what an index shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from hatchling.builders.sdist import SdistBuilder

ROOT = Path(__file__).resolve().parent.parent
#: What `make test`, `make test-min` and `make docs` read, beside the package itself.
NEEDED = (
    "Makefile",
    ".ci/run",
    "pyproject.toml",
    "mkdocs.yml",
    "docs/reference.md",
    "README.md",
    "CHANGELOG.md",
    "LICENSE",
    "tests/conftest.py",
    "tests/test_docs.py",
    "docs/guides/counting.md",
    "examples/quickstart.py",
    "langchain_turntrim/_cli/sample_conversation.json",
    "langchain_turntrim/py.typed",
)


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist, built from this tree and unpacked."""
    out = tmp_path_factory.mktemp("dist")
    (archive,) = SdistBuilder(str(ROOT)).build(directory=str(out), versions=["standard"])
    with tarfile.open(archive) as tar:
        tar.extractall(out, filter="data")
    (unpacked,) = (p for p in out.iterdir() if p.is_dir())
    return unpacked


def test_the_sdist_holds_what_the_tests_need(sdist: Path) -> None:
    missing = [name for name in NEEDED if not (sdist / name).is_file()]
    assert missing == []
    tests = {p.name for p in (ROOT / "tests").glob("*.py")}
    assert {p.name for p in (sdist / "tests").glob("*.py")} == tests


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``pytest -q`` run in ``folder``, outside this run's own pytest settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def test_the_tests_run_from_the_sdist(sdist: Path) -> None:
    done = _pytest(sdist, "tests/test_docs.py")
    assert done.returncode == 0, done.stdout + done.stderr
    collected = _pytest(sdist, "--collect-only")
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert re.search(r"^\d{3,} tests collected", collected.stdout, re.MULTILINE)


def test_readme_links_work_on_an_index_page() -> None:
    """An index shows the README alone: a relative link there leads nowhere."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)]+)\)", readme)
    assert [t for t in targets if not re.match(r"https?://", t)] == []


def test_the_metadata_names_the_python_versions_tested() -> None:
    """A classifier for each Python the suite is run on, this one included, and
    ``requires-python``'s floor the oldest of them."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    versions = re.findall(r'"Programming Language :: Python :: (3\.\d+)"', pyproject)
    tested = sorted(tuple(map(int, v.split("."))) for v in versions)
    assert f"{sys.version_info.major}.{sys.version_info.minor}" in versions
    (floor,) = re.findall(r'^requires-python = ">=(3\.\d+)"$', pyproject, re.MULTILINE)
    assert tuple(map(int, floor.split("."))) == tested[0]
