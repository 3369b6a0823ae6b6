"""The snapshot's chunk texts: once saved, read by row from a file, not held as strings.

At a million chunks the texts held as Python strings cost ~1.3 GB, yet a search reads the
dozen it returns. A saved snapshot writes its texts to one UTF-8 file beside it
(``<snapshot>.texts``, with the offsets in the pickle) and reads them back through a
memory map, so a process holds the pages it read (clean file pages, shared between the
processes of one data home), not every text. Rows appended since the save (a change's
chunks) are kept as strings until the next save. Compaction reorders the row → text map;
no text is copied. A snapshot read by :func:`reading_from` finds its texts file beside
itself, not at the path it was saved to, so a data home moved, restored from a backup
or copied to a new server keeps its snapshot.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import uuid
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import numpy as np

_BESIDE: ContextVar[Path | None] = ContextVar("text_column_beside", default=None)


@contextlib.contextmanager
def reading_from(directory: Path) -> Iterator[None]:
    """Columns unpickled in this block read their texts file from ``directory``."""
    token = _BESIDE.set(directory)
    try:
        yield
    finally:
        _BESIDE.reset(token)


class Blob:
    """The saved texts: one UTF-8 file, its offsets, and the open map of it (opened once;
    a file removed afterwards by another process's save stays readable through it)."""

    def __init__(self, path: Path, offsets: np.ndarray) -> None:
        self.path = path
        self.offsets = offsets
        self.data: mmap.mmap | bytes = b""
        if offsets[-1] > 0:
            with path.open("rb") as fh:
                self.data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)

    def __getitem__(self, at: int) -> bytes:
        return self.data[int(self.offsets[at]) : int(self.offsets[at + 1])]

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "offsets": self.offsets}

    def __setstate__(self, state: dict[str, Any]) -> None:
        path, beside = Path(state["path"]), _BESIDE.get()
        if beside is not None:  # the directory it is read from, not the one it was saved in
            path = beside / path.name
        self.__init__(path, state["offsets"])  # type: ignore[misc]


class TextColumn:
    """One text per row: ``src[row] >= 0`` is text ``src[row]`` of the saved file,
    ``< 0`` the string ``extra[-1 - src[row]]``."""

    def __init__(self, src: np.ndarray, extra: Sequence[str], blob: Blob | None = None) -> None:
        self.src = src
        self.extra = extra
        self.blob = blob

    @classmethod
    def of(cls, texts: Sequence[str]) -> TextColumn:
        """Texts held as strings (a snapshot not saved yet)."""
        return cls(-1 - np.arange(len(texts), dtype=np.int64), list(texts))

    def __len__(self) -> int:
        return len(self.src)

    def __getitem__(self, row: int) -> str:
        return self._bytes(int(self.src[row])).decode("utf-8")

    def _bytes(self, at: int) -> bytes:
        if at < 0:
            return self.extra[-1 - at].encode("utf-8")
        assert self.blob is not None
        return self.blob[at]

    def appended(self, texts: Sequence[str]) -> TextColumn:
        """This column with ``texts`` as new rows after the last."""
        start = len(self.extra)
        src = np.concatenate([self.src, -1 - np.arange(start, start + len(texts), dtype=np.int64)])
        return TextColumn(src, [*self.extra, *texts], self.blob)

    def taken(self, rows: np.ndarray) -> TextColumn:
        """The texts of ``rows``, in that order, as a new column (nothing copied; strings of
        dropped rows are let go at the next save)."""
        return TextColumn(self.src[rows], self.extra, self.blob)

    def saved(self, path: Path) -> TextColumn:
        """Every row's text written to ``path`` (atomically) and this column read from it."""
        offsets = np.zeros(len(self) + 1, dtype=np.int64)
        tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        try:
            with tmp.open("wb") as fh:
                at = 0
                for row in range(len(self)):
                    data = self._bytes(int(self.src[row]))
                    fh.write(data)
                    at += len(data)
                    offsets[row + 1] = at
            tmp.replace(path)
        finally:
            tmp.unlink(missing_ok=True)
        return TextColumn(np.arange(len(self), dtype=np.int64), [], Blob(path, offsets))

    def __getstate__(self) -> dict[str, Any]:
        # The saved texts are pickled as their path and offsets (``Blob``): the cache
        # writes the file first (``saved``); strings appended since as they are.
        return {"src": self.src, "extra": list(self.extra), "blob": self.blob}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["src"], state["extra"], state["blob"])  # type: ignore[misc]
