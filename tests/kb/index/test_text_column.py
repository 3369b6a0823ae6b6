"""The snapshot's texts on disk (issue 44, memory at 1M chunks): a column read back from
its file equals the strings it was made of, through appends, reorders and pickling, and
stays readable after another process's save removed the file, and is found beside its
snapshot when the data home moved."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from tools.kb.index.text_column import TextColumn, reading_from

TEXTS = ["员工年假", "", "Annual leave: 18 days.", "混合 mixed ✓ text", "x" * 5000]


def test_saved_texts_read_back_equal(tmp_path: Path) -> None:
    column = TextColumn.of(TEXTS)
    saved = column.saved(tmp_path / "c.texts")
    assert [saved[i] for i in range(len(saved))] == TEXTS
    assert saved.extra == [] and saved.blob is not None  # no strings held
    grown = saved.appended(["新的", "new"]).taken(np.array([6, 0, 3, 5]))
    assert [grown[i] for i in range(len(grown))] == ["new", TEXTS[0], TEXTS[3], "新的"]
    again = grown.saved(tmp_path / "d.texts")
    assert [again[i] for i in range(len(again))] == ["new", TEXTS[0], TEXTS[3], "新的"]


def test_a_pickled_column_names_its_file_and_survives_its_removal(tmp_path: Path) -> None:
    saved = TextColumn.of(TEXTS).appended(["tail"]).saved(tmp_path / "c.texts")
    data = pickle.dumps(saved.appended(["after the save"]))
    assert b"Annual leave" not in data  # the saved texts stay in the file
    loaded = pickle.loads(data)
    (tmp_path / "c.texts").unlink()  # another process saved a newer snapshot
    assert [loaded[i] for i in range(len(loaded))] == [*TEXTS, "tail", "after the save"]
    assert loaded.appended(["more"])[len(loaded)] == "more"


def test_a_column_read_from_a_moved_directory_finds_its_texts_there(tmp_path: Path) -> None:
    """A data home moved, restored from a backup or copied to a new server: the snapshot
    read there finds the texts file beside it, not at the path it was saved to (the
    original may be gone, or another generation's)."""
    (tmp_path / "old").mkdir()
    data = pickle.dumps(TextColumn.of(TEXTS).saved(tmp_path / "old" / "c.texts"))
    (tmp_path / "old").rename(tmp_path / "new")
    with reading_from(tmp_path / "new"):
        loaded = pickle.loads(data)
    assert [loaded[i] for i in range(len(loaded))] == TEXTS
    assert loaded.blob is not None and loaded.blob.path == tmp_path / "new" / "c.texts"


def test_an_empty_column_saves(tmp_path: Path) -> None:
    saved = TextColumn.of([]).saved(tmp_path / "e.texts")
    assert len(saved) == 0 and len(pickle.loads(pickle.dumps(saved))) == 0
    assert TextColumn.of([""]).saved(tmp_path / "f.texts")[0] == ""
