"""BM25 tokenisation (``tools.kb.index.tokenizers``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tools.errors import ConfigError
from tools.kb.index.tokenizers import (
    CHINESE_MODES,
    CHINESE_STOPWORDS,
    ENGLISH_STOPWORDS,
    make_tokenizer,
)

Tokenizer = Callable[[str], list[str]]


@pytest.fixture(scope="module")
def jieba_tok() -> Tokenizer:
    return make_tokenizer("jieba")


@pytest.fixture(scope="module")
def bigram_tok() -> Tokenizer:
    return make_tokenizer("bigram")


# -- English -------------------------------------------------------------------------------


def test_english_casefold_punctuation_and_stopwords(bigram_tok: Tokenizer) -> None:
    assert bigram_tok("The Policies, for ANNUAL-leave: days!") == [
        "policies",
        "annual",
        "leave",
        "days",
    ]


def test_english_casefold_is_unicode_aware(bigram_tok: Tokenizer) -> None:
    assert bigram_tok("Straße STRASSE Café") == ["strasse", "strasse", "café"]


def test_underscore_splits_words(bigram_tok: Tokenizer) -> None:
    assert bigram_tok("foo_bar baz") == ["foo", "bar", "baz"]


def test_only_stopwords_and_punctuation_give_nothing(bigram_tok: Tokenizer) -> None:
    assert bigram_tok("What is the, and of it?!") == []
    assert bigram_tok("") == []
    assert bigram_tok("   ...   ") == []


def test_numbers_and_codes_are_kept(bigram_tok: Tokenizer) -> None:
    assert bigram_tok("Call extension 4455 for HR-POL-007") == [
        "call",
        "extension",
        "4455",
        "hr",
        "pol",
        "007",
    ]


def test_stopword_lists_are_lowercase() -> None:
    assert all(w == w.casefold() for w in ENGLISH_STOPWORDS)
    assert "the" in ENGLISH_STOPWORDS and "的" in CHINESE_STOPWORDS


@pytest.mark.parametrize(
    ("word", "stemmed"),
    [
        ("policies", "polici"),
        ("days", "day"),
        ("class", "class"),
        ("classes", "class"),
        ("status", "status"),
        ("analysis", "analysi"),
        ("processed", "process"),
        ("approving", "approv"),
        ("generalization", "general"),  # Snowball removes derivational suffixes too
        ("bus", "bus"),  # too short to stem
        ("its", "its"),
    ],
)
def test_stemming_on(word: str, stemmed: str) -> None:
    tok = make_tokenizer("bigram", stem=True)
    got = tok(word)
    if word in ENGLISH_STOPWORDS:
        assert got == []
    else:
        assert got == [stemmed]


def test_stemming_matches_plural_and_singular() -> None:
    tok = make_tokenizer("jieba", stem=True)
    assert tok("Policies days") == tok("policy day") == ["polici", "day"]


def test_stemming_keeps_mixed_chinese_and_english_text() -> None:
    # Latin runs inside Chinese text are stemmed; the Chinese words stay jieba's.
    tok = make_tokenizer("jieba", stem=True)
    assert tok("员工报销policies和running costs") == ["员工", "报销", "polici", "run", "cost"]


def test_stemming_off_by_default(bigram_tok: Tokenizer) -> None:
    assert bigram_tok("policies days classes") == ["policies", "days", "classes"]


def test_stemming_leaves_non_ascii_and_digits(bigram_tok: Tokenizer) -> None:
    tok = make_tokenizer("bigram", stem=True)
    assert tok("cafés 1990s") == ["cafés", "1990s"]


# -- Chinese -------------------------------------------------------------------------------

SENTENCE = "员工工作满一年后享有带薪年假"


def test_chinese_bigrams(bigram_tok: Tokenizer) -> None:
    assert bigram_tok(SENTENCE) == [
        "员工",
        "工工",
        "工作",
        "作满",
        "满一",
        "一年",
        "年后",
        "后享",
        "享有",
        "有带",
        "带薪",
        "薪年",
        "年假",
    ]


def test_chinese_single_character_run_in_bigram_mode(bigram_tok: Tokenizer) -> None:
    assert bigram_tok("假") == ["假"]
    assert bigram_tok("的") == []  # stopword


def test_chinese_jieba_words(jieba_tok: Tokenizer) -> None:
    tokens = jieba_tok(SENTENCE)
    for word in ("员工", "工作", "享有", "带薪"):
        assert word in tokens
    # Words, not overlapping character pairs.
    assert "工工" not in tokens and "作满" not in tokens
    assert len(tokens) < len(make_tokenizer("bigram")(SENTENCE))


def test_chinese_stopwords_removed(jieba_tok: Tokenizer, bigram_tok: Tokenizer) -> None:
    assert "的" not in jieba_tok("公司的年假制度是什么")
    assert "什么" not in jieba_tok("公司的年假制度是什么")
    assert "制度" in jieba_tok("公司的年假制度是什么")
    assert bigram_tok("公司的年假") == ["公司", "司的", "的年", "年假"]  # bigrams keep 的 inside


def test_mixed_text_with_spaces(jieba_tok: Tokenizer, bigram_tok: Tokenizer) -> None:
    text = "使用 FleetCloud 平台调度 NR500 机器人"
    j = jieba_tok(text)
    b = bigram_tok(text)
    assert "fleetcloud" in j and "nr500" in j and "使用" in j and "机器人" in j
    assert b == ["使用", "fleetcloud", "平台", "台调", "调度", "nr500", "机器", "器人"]


@pytest.mark.parametrize("mode", CHINESE_MODES)
def test_mixed_text_without_spaces_segments_chinese(mode: str) -> None:
    tok = make_tokenizer(mode)
    tokens = tok("NR500机器人的电池续航8小时")
    assert "nr500" in tokens
    assert any(t in tokens for t in ("机器人", "机器"))
    tokens = tok("员工工作满1年后享有5天年假")
    assert "享有" in tokens


def test_unknown_chinese_mode_is_config_error() -> None:
    with pytest.raises(ConfigError, match="pinyin"):
        make_tokenizer("pinyin")
    with pytest.raises(ConfigError, match="jieba"):
        make_tokenizer("")
