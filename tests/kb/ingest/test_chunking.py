"""Structure-aware Markdown chunking (``tools.kb.ingest.chunking``)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from tools.errors import ConfigError
from tools.kb.ingest.chunking import Chunk, ChunkingOptions, chunk_document
from tools.kb.ingest.identity import find_files
from tools.kb.ingest.loaders import SourceDocument, load_file
from tools.text import estimate_tokens, split_sentences

SAMPLE_KB = Path(__file__).resolve().parents[3] / "examples" / "kb"
SMALL = ChunkingOptions(target_tokens=60, max_tokens=80, overlap_tokens=20)
NO_OVERLAP = ChunkingOptions(target_tokens=60, max_tokens=80, overlap_tokens=0)
_SEPARATOR_RE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


def _assert_well_formed(chunks: list[Chunk]) -> None:
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        assert c.total_chunks == len(chunks)
        assert c.text.strip(), "empty chunk"


def _assert_in_order(needles: list[str], chunks: list[Chunk]) -> None:
    """Every needle appears in some chunk, and first appearances keep source order."""
    joined = "\n\x00\n".join(c.text for c in chunks)
    pos = -1
    for needle in needles:
        found = joined.find(needle, pos + 1)
        assert found > pos, f"missing or out of order: {needle!r}"
        pos = found


def _english_sentences(n: int) -> list[str]:
    return [f"Sentence {i} is about topic {i % 7}." for i in range(n)]


# -- plain text, empty input -------------------------------------------------------------


def test_plain_text_without_headings_is_one_chunk() -> None:
    text = "# not a heading in plain text\nFirst line. Second line.\n\n| not | a table |"
    chunks = chunk_document(text, markdown=False)
    _assert_well_formed(chunks)
    assert len(chunks) == 1
    assert chunks[0].heading_path == ()
    assert chunks[0].heading == ""
    assert not chunks[0].is_table
    assert "# not a heading" in chunks[0].text and "| not | a table |" in chunks[0].text
    assert chunks[0].index_text() == chunks[0].text


def test_markdown_without_headings_has_empty_heading_path() -> None:
    chunks = chunk_document("Just a paragraph.\n\nAnd another one.")
    assert [c.heading_path for c in chunks] == [()]
    assert chunks[0].text == "Just a paragraph.\n\nAnd another one."


@pytest.mark.parametrize("text", ["", " ", "\n\n\n", " \t\n  \n\t", "\r\n \r\n"])
@pytest.mark.parametrize("markdown", [True, False])
def test_empty_or_whitespace_input_gives_no_chunks(text: str, markdown: bool) -> None:
    assert chunk_document(text, markdown=markdown) == []


def test_headings_without_body_give_no_chunks() -> None:
    assert chunk_document("# Title\n\n## Sub\n\n### Deeper\n") == []


# -- oversized prose ---------------------------------------------------------------------


def test_huge_paragraph_is_split_at_sentence_boundaries() -> None:
    sentences = _english_sentences(60)
    paragraph = " ".join(sentences)
    assert estimate_tokens(paragraph) > 4 * SMALL.max_tokens
    chunks = chunk_document(paragraph, options=SMALL)
    _assert_well_formed(chunks)
    assert len(chunks) > 4
    for c in chunks:
        assert estimate_tokens(c.text) <= SMALL.max_tokens
        # Only whole sentences: every piece of a chunk is one of the source sentences.
        assert set(split_sentences(c.text)) <= set(sentences)
    _assert_in_order(sentences, chunks)


def test_huge_paragraph_without_overlap_loses_and_repeats_nothing() -> None:
    sentences = _english_sentences(60)
    chunks = chunk_document(" ".join(sentences), options=NO_OVERLAP)
    _assert_well_formed(chunks)
    assert [s for c in chunks for s in split_sentences(c.text)] == sentences
    assert all(estimate_tokens(c.text) <= NO_OVERLAP.max_tokens for c in chunks)


def test_huge_chinese_paragraph_without_spaces() -> None:
    sentences = [f"这是第{i}个句子，内容涉及年假制度和报销流程。" for i in range(50)]
    paragraph = "".join(sentences)
    assert " " not in paragraph
    chunks = chunk_document(paragraph, options=SMALL)
    _assert_well_formed(chunks)
    assert len(chunks) > 4
    for c in chunks:
        assert estimate_tokens(c.text) <= SMALL.max_tokens
        assert set(split_sentences(c.text)) <= set(sentences)
        assert c.text.endswith("。")
    _assert_in_order(sentences, chunks)
    no_overlap = chunk_document(paragraph, options=NO_OVERLAP)
    assert "".join(c.text for c in no_overlap) == paragraph


def test_giant_english_sentence_is_cut_at_word_boundaries() -> None:
    words = [f"word{i}" for i in range(300)]
    sentence = " ".join(words)
    chunks = chunk_document(sentence, options=SMALL)
    _assert_well_formed(chunks)
    assert len(chunks) > 3
    assert all(estimate_tokens(c.text) <= SMALL.max_tokens for c in chunks)
    # No word is cut, none lost, none duplicated (a cut piece is not a sentence, so no overlap).
    assert [w for c in chunks for w in c.text.split()] == words


def test_giant_chinese_sentence_is_cut_at_character_boundaries() -> None:
    sentence = "机器人在仓库中自动搬运货物" * 30  # 390 CJK characters, no punctuation
    chunks = chunk_document(sentence, options=SMALL)
    _assert_well_formed(chunks)
    assert len(chunks) >= 5
    assert all(estimate_tokens(c.text) <= SMALL.max_tokens for c in chunks)
    assert "".join(c.text for c in chunks) == sentence


def test_giant_mixed_sentence_with_a_space_respects_max_tokens() -> None:
    sentence = "NR500 机器人" + "非常可靠地搬运货物" * 30  # one space, 272 CJK characters
    chunks = chunk_document(sentence, options=SMALL)
    assert all(estimate_tokens(c.text) <= SMALL.max_tokens for c in chunks), [
        estimate_tokens(c.text) for c in chunks
    ]


def test_overlap_never_pushes_a_chunk_over_max_tokens() -> None:
    opts = ChunkingOptions()  # target 300, max 480, overlap 40
    intro = "The policy starts here. This is the short last sentence."
    body_sentences = [f"Clause {i} defines rule {i} for every employee." for i in range(36)]
    body = " ".join(body_sentences)
    assert opts.max_tokens - 20 < estimate_tokens(body) <= opts.max_tokens
    chunks = chunk_document(f"# Policy\n\n{intro}\n\n{body}", options=opts)
    assert len(chunks) == 2
    assert all(estimate_tokens(c.text) <= opts.max_tokens for c in chunks), [
        estimate_tokens(c.text) for c in chunks
    ]


# -- tables ------------------------------------------------------------------------------

SMALL_TABLE = (
    "| Years of service | Annual leave |\n"
    "|------------------|--------------|\n"
    "| Less than 1 year | 10 days |\n"
    "| 1 to 3 years | 12 days |\n"
    "| 3 to 5 years | 15 days |"
)


def test_small_table_appears_whole_in_exactly_one_chunk() -> None:
    before = " ".join(_english_sentences(12))
    after = " ".join(_english_sentences(12))
    text = f"# Leave\n\n{before}\n\n{SMALL_TABLE}\n\n{after}\n"
    assert estimate_tokens(SMALL_TABLE) < SMALL.max_tokens
    chunks = chunk_document(text, options=SMALL)
    _assert_well_formed(chunks)
    holders = [c for c in chunks if SMALL_TABLE in c.text]
    assert len(holders) == 1
    assert holders[0].is_table
    # No other chunk holds any row of it.
    for c in chunks:
        if c is not holders[0]:
            assert "|" not in c.text
            assert not c.is_table


def test_table_directly_after_prose_line_is_its_own_block() -> None:
    text = "Leave table follows:\n" + SMALL_TABLE + "\nAll figures are working days."
    chunks = chunk_document(text)
    assert len(chunks) == 1
    assert SMALL_TABLE in chunks[0].text
    assert chunks[0].is_table


def _big_table(rows: int) -> tuple[str, list[str], list[str]]:
    header = ["| Item | Limit | Approver |", "|---|---|---|"]
    body = [
        f"| Expense type {i} | {100 * i} CNY per night | Manager level {i % 4} |"
        for i in range(rows)
    ]
    return "\n".join(header + body), header, body


def test_oversized_table_is_split_between_rows_with_header_repeated() -> None:
    table, header, body = _big_table(40)
    assert estimate_tokens(table) > 4 * SMALL.max_tokens
    chunks = chunk_document(f"# Limits\n\n{table}\n", options=SMALL)
    _assert_well_formed(chunks)
    assert len(chunks) > 4
    seen_rows: list[str] = []
    for c in chunks:
        assert c.is_table
        assert c.heading_path == ("Limits",)
        assert estimate_tokens(c.text) <= SMALL.max_tokens
        lines = c.text.split("\n")
        assert lines[:2] == header, "header and separator repeated in every part"
        assert len(lines) > 2
        assert all(line in body for line in lines[2:]), "only whole rows"
        seen_rows.extend(lines[2:])
    assert seen_rows == body  # every row exactly once, in order


def test_oversized_table_without_separator_repeats_first_row() -> None:
    rows = [f"| row {i} | value {i} with several extra words |" for i in range(40)]
    table = "\n".join(["| key | value |", *rows])
    chunks = chunk_document(table, options=SMALL)
    assert len(chunks) > 2
    for c in chunks:
        lines = c.text.split("\n")
        assert lines[0] == "| key | value |"
        assert not _SEPARATOR_RE.match(lines[1])
    assert [line for c in chunks for line in c.text.split("\n")[1:]] == rows


# -- code fences and headings -------------------------------------------------------------


@pytest.mark.parametrize("fence", ["```", "~~~"])
def test_hash_lines_inside_code_fences_are_not_headings(fence: str) -> None:
    text = (
        "# Setup\n\nRun the script below.\n\n"
        f"{fence}bash\n# install dependencies\npip install x\n## not a heading either\n{fence}\n\n"
        "After the script, restart.\n"
    )
    chunks = chunk_document(text)
    _assert_well_formed(chunks)
    assert {c.heading_path for c in chunks} == {("Setup",)}
    joined = "\n".join(c.text for c in chunks)
    assert "# install dependencies" in joined
    assert "## not a heading either" in joined
    assert "After the script, restart." in joined


def test_heading_paths_nest_and_siblings_reset() -> None:
    text = (
        "# Annual leave\n\nIntro text.\n\n"
        "## Entitlement\n\nEntitlement text.\n\n"
        "### By years of service\n\nYears text.\n\n"
        "## Carry-over ##\n\nCarry text.\n\n"
        "### Deadline\n\nDeadline text.\n\n"
        "# Sick leave\n\nSick text.\n\n"
        "### Skipped level\n\nSkipped text.\n"
    )
    chunks = chunk_document(text)
    _assert_well_formed(chunks)
    got = [(c.heading_path, c.text) for c in chunks]
    assert got == [
        (("Annual leave",), "Intro text."),
        (("Annual leave", "Entitlement"), "Entitlement text."),
        (("Annual leave", "Entitlement", "By years of service"), "Years text."),
        (("Annual leave", "Carry-over"), "Carry text."),
        (("Annual leave", "Carry-over", "Deadline"), "Deadline text."),
        (("Sick leave",), "Sick text."),
        (("Sick leave", "Skipped level"), "Skipped text."),
    ]
    years = chunks[2]
    assert years.heading == "Annual leave > Entitlement > By years of service"
    assert years.index_text() == "Annual leave > Entitlement > By years of service\nYears text."


def test_hash_without_space_is_not_a_heading() -> None:
    chunks = chunk_document("# Title\n\n#hashtag is text\n")
    assert [(c.heading_path, c.text) for c in chunks] == [(("Title",), "#hashtag is text")]


def test_mixed_language_document() -> None:
    text = (
        "# Annual leave 年假\n\nEmployees receive 15 days. 员工享有十五天年假。\n\n"
        "## 结转\n\n未使用的年假最多可结转5天。Unused days carry over.\n"
    )
    chunks = chunk_document(text)
    _assert_well_formed(chunks)
    assert [c.heading_path for c in chunks] == [
        ("Annual leave 年假",),
        ("Annual leave 年假", "结转"),
    ]
    assert chunks[0].text == "Employees receive 15 days. 员工享有十五天年假。"
    assert chunks[1].text == "未使用的年假最多可结转5天。Unused days carry over."


# -- merging and overlap ------------------------------------------------------------------


def test_small_blocks_of_a_section_are_merged() -> None:
    text = "# A\n\nOne.\n\nTwo.\n\nThree.\n\n# B\n\nFour.\n"
    chunks = chunk_document(text)
    assert [(c.heading_path, c.text) for c in chunks] == [
        (("A",), "One.\n\nTwo.\n\nThree."),
        (("B",), "Four."),
    ]


def test_consecutive_prose_chunks_share_trailing_sentences() -> None:
    sentences = _english_sentences(40)
    chunks = chunk_document("# S\n\n" + " ".join(sentences), options=SMALL)
    _assert_well_formed(chunks)
    assert len(chunks) >= 3
    for prev, nxt in itertools.pairwise(chunks):
        prev_s = split_sentences(prev.text)
        next_s = split_sentences(nxt.text)
        shared = [s for s in next_s if s in prev_s]
        assert shared, "no overlap"
        # The overlap is the previous chunk's trailing sentences, at the start of the next.
        assert next_s[: len(shared)] == shared == prev_s[-len(shared) :]
        assert estimate_tokens(" ".join(shared)) <= SMALL.overlap_tokens


def test_overlap_zero_shares_nothing() -> None:
    chunks = chunk_document("# S\n\n" + " ".join(_english_sentences(40)), options=NO_OVERLAP)
    for prev, nxt in itertools.pairwise(chunks):
        assert not set(split_sentences(prev.text)) & set(split_sentences(nxt.text))


def test_no_overlap_across_sections() -> None:
    a = _english_sentences(12)
    b = [f"Other {i} differs." for i in range(3)]
    chunks = chunk_document("# A\n\n" + " ".join(a) + "\n\n# B\n\n" + " ".join(b), options=SMALL)
    b_chunks = [c for c in chunks if c.heading_path == ("B",)]
    assert [c.text for c in b_chunks] == [" ".join(b)]


def test_no_overlap_taken_from_or_put_before_a_table() -> None:
    para1 = " ".join(_english_sentences(8))  # about 50 tokens
    table_rows = [f"| Row {i} | Value {i} |" for i in range(6)]
    table = "\n".join(["| Name | Value |", "|---|---|", *table_rows])
    para2 = " ".join(f"Closing remark {i} here." for i in range(8))
    assert estimate_tokens(para1) + estimate_tokens(table) > SMALL.target_tokens
    chunks = chunk_document(f"# T\n\n{para1}\n\n{table}\n\n{para2}", options=SMALL)
    _assert_well_formed(chunks)
    texts = [c.text for c in chunks]
    assert texts == [para1, table, para2]
    assert [c.is_table for c in chunks] == [False, True, False]


def test_chunk_ending_with_table_gives_no_overlap() -> None:
    lead = "Limits are below."
    table = "| Item | Limit |\n|---|---|\n| Hotel | 600 CNY |\n| Taxi | 200 CNY |"
    tail = " ".join(f"Closing remark {i} here." for i in range(8))
    chunks = chunk_document(f"# T\n\n{lead}\n\n{table}\n\n{tail}", options=SMALL)
    assert chunks[0].text == f"{lead}\n\n{table}"
    assert chunks[0].is_table
    assert chunks[1].text == tail
    assert "|" not in chunks[1].text


def test_numbering_across_sections() -> None:
    text = "\n\n".join(f"# H{i}\n\n" + " ".join(_english_sentences(15)) for i in range(3))
    chunks = chunk_document(text, options=SMALL)
    _assert_well_formed(chunks)
    assert len(chunks) > 3
    assert [c.heading_path[0] for c in chunks] == sorted(c.heading_path[0] for c in chunks)


# -- options validation -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"target_tokens": 19}, "target_tokens"),
        ({"target_tokens": 0}, "target_tokens"),
        ({"target_tokens": 300, "max_tokens": 299}, "max_tokens"),
        ({"target_tokens": 100, "max_tokens": 200, "overlap_tokens": 50}, "overlap_tokens"),
        ({"target_tokens": 100, "max_tokens": 200, "overlap_tokens": -1}, "overlap_tokens"),
    ],
)
def test_chunking_options_validation(kwargs: dict[str, int], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        ChunkingOptions(**kwargs)


def test_chunking_options_boundaries_accepted() -> None:
    ChunkingOptions(target_tokens=20, max_tokens=20, overlap_tokens=9)
    ChunkingOptions(target_tokens=100, max_tokens=100, overlap_tokens=0)
    assert issubclass(ConfigError, ValueError)


# -- property test on the sample knowledge base --------------------------------------------


def _sample_docs() -> list[SourceDocument]:
    if not SAMPLE_KB.exists():
        pytest.skip("examples/kb is missing")
    docs = [load_file(f.path, f.name) for f in find_files([SAMPLE_KB])[0]]
    out = [d for d in docs if isinstance(d, SourceDocument)]
    assert out
    return out


def _check_sample_doc(doc: SourceDocument, opts: ChunkingOptions) -> list[str]:
    chunks = chunk_document(doc.text, markdown=doc.is_markdown, options=opts)
    problems: list[str] = []
    assert chunks, doc.doc_id
    _assert_well_formed(chunks)
    for c in chunks:
        size = estimate_tokens(c.text)
        if size > opts.max_tokens:  # the hard bound has no exception
            problems.append(f"{doc.doc_id}#{c.chunk_index}: {size} > {opts.max_tokens}")
    chunk_lines = {line.strip() for c in chunks for line in c.text.split("\n")}
    if doc.is_markdown:
        for line in doc.text.split("\n"):
            # a row is kept whole whenever it fits the bound on its own
            if line.lstrip().startswith("|") and estimate_tokens(line) <= opts.max_tokens:
                assert line.strip() in chunk_lines, f"{doc.doc_id}: table line lost: {line!r}"
    return problems


@pytest.mark.parametrize(
    "opts",
    [ChunkingOptions(), ChunkingOptions(target_tokens=120, max_tokens=200, overlap_tokens=30)],
    ids=["default", "medium"],
)
def test_sample_kb_chunks_are_bounded_and_keep_tables(opts: ChunkingOptions) -> None:
    docs = _sample_docs()
    problems = [p for doc in docs for p in _check_sample_doc(doc, opts)]
    assert problems == []


def test_sample_kb_small_options_respect_max_tokens() -> None:
    opts = ChunkingOptions(target_tokens=40, max_tokens=60, overlap_tokens=10)
    problems = [p for doc in _sample_docs() for p in _check_sample_doc(doc, opts)]
    assert problems == []
