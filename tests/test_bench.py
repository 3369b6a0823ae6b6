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


def test_the_graders_read_crag_answers_as_they_are_given() -> None:
    """CRAG's public sample writes ``alternative_answers`` as the string "[]": unpacked as
    a list, "[" and "]" became expected answers and every answer with a citation label
    counted as right (bench_model_mode reported 2-3 of 4 CRAG answers right where 1 was).
    And a two-letter answer ("en") is a word, not a substring of "often"."""
    from bench.model_runs import gradable, is_right
    from bench.pages_data import crag_gold

    row = {"answer": "en", "alternative_answers": "[]"}
    assert crag_gold(row) == ["en"]
    assert crag_gold({"answer": "nan", "alternative_answers": "[]"}) == []
    assert crag_gold({"answer": "yes", "alternative_answers": ["Yes, it is"]}) == [
        "yes",
        "Yes, it is",
    ]
    assert not is_right("It came out often in Latin [internal-1].", crag_gold(row))
    assert is_right("It came out in EN first [internal-1].", crag_gold(row))
    assert is_right("The range is 1000 km [web-1].", ["1,000 km"])
    assert is_right("Above 55°C [internal-2].", ["Battery temperature above 55 °C", "55 °C"])
    assert is_right("住宿标准为每晚650元 [内部-1]", ["650"])
    assert is_right("It is 120 yuan per day [internal-2].", ["120元"])
    assert is_right("每天120元 [内部-2]", ["120元"]) and is_right("CNY 120 [internal-1]", ["120元"])
    assert (
        not is_right("1120 yuan [internal-2]", ["120元"])
        and not is_right("120 km", ["120元"])
        and not is_right("6500 [web-1]", ["650"])
    )
    assert is_right("死亡人数为12人 [内部-1]", ["12人"]) and not is_right("12 [内部-1]", ["12人"])
    assert not is_right("No relevant information found.", ["information"])
    sentence = "rory mcilroy has never won the masters tournament, despite being one of the best"
    assert not gradable([sentence]) and gradable([sentence, "never"])
