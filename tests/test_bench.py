"""The benches cannot rot unseen: every bench module imports (nothing runs), none edits
``sys.path`` (they run as ``python -m bench.<name>`` from the repository root), and each is
named with its command in bench/README.md."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
BENCHES = sorted(p.stem for p in BENCH.glob("bench_*.py"))
SYS_PATH_EDIT = re.compile(r"sys\.path\s*(\.\s*(insert|append|extend|remove)\b|\[|\+?=[^=])")


def test_the_benches_are_found() -> None:
    assert len(BENCHES) >= 20, BENCHES


@pytest.mark.parametrize("name", BENCHES)
def test_every_bench_imports_and_has_a_main(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Importing the bench package sets OMP_NUM_THREADS; monkeypatch restores the env.
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    module = importlib.import_module(f"bench.{name}")
    assert callable(getattr(module, "main", None)), f"bench.{name} has no main()"
    assert module.__doc__, f"bench.{name} says nothing about what it measures"


def test_no_bench_edits_sys_path() -> None:
    offenders = [
        f"{path.name}:{n}: {line.strip()}"
        for path in sorted(BENCH.glob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if SYS_PATH_EDIT.search(line)
    ]
    assert offenders == []


def test_the_check_sees_a_sys_path_edit() -> None:
    assert SYS_PATH_EDIT.search("sys.path.insert(0, str(REPO))")
    assert SYS_PATH_EDIT.search("sys.path[:0] = [root]")
    assert not SYS_PATH_EDIT.search("for path in sys.path:")


def test_every_bench_has_its_command_in_the_readme() -> None:
    readme = (BENCH / "README.md").read_text(encoding="utf-8")
    missing = [n for n in BENCHES if f"-m bench.{n}" not in readme]
    assert missing == []
