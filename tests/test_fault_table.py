"""docs/FAULTS.md cannot drift: every row names tests that exist."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "docs" / "FAULTS.md"
TEST_REF = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)`")


def _rows() -> list[str]:
    return [
        line
        for line in TABLE.read_text(encoding="utf-8").splitlines()
        if line.startswith("| ")
        and not line.startswith("| fault")
        and "---" not in line
        and not line.startswith("| input")
    ]


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def test_every_row_names_a_test_that_exists() -> None:
    rows = _rows()
    assert len(rows) >= 20, "the fault table lost its rows"
    missing: list[str] = []
    for row in rows:
        refs = TEST_REF.findall(row)
        assert refs, f"row names no test: {row[:80]}"
        for file, name in refs:
            path = ROOT / file
            if not path.is_file() or name not in _test_names(path):
                missing.append(f"{file}::{name}")
    assert not missing, f"docs/FAULTS.md names tests that do not exist: {missing}"


def test_the_readme_points_at_the_table() -> None:
    assert "docs/FAULTS.md" in (ROOT / "README.md").read_text(encoding="utf-8")
