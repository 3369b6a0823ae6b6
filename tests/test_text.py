"""Language detection, token estimates and sentence splitting (``tools.text``)."""

from __future__ import annotations

import pytest

from tools.text import count_cjk, detect_language, estimate_tokens, split_sentences

# -- detect_language ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("员工工作满一年后享有5天带薪年假。", "zh"),
        ("Employees receive 15 days of annual leave after five years.", "en"),
        # Chinese technical text full of Latin product names is still Chinese.
        ("NR500 机器人通过 FleetCloud 平台调度，电池续航8小时。", "zh"),
        ("请在 PeopleHub 中提交申请", "zh"),
        ("12345 67.89 2024-11-01", "en"),
        ("", "en"),
        # One Chinese word in English prose does not make it Chinese.
        (
            "A Chinese version of this policy (年假) is published at the same time as "
            "the English one.",
            "en",
        ),
    ],
)
def test_detect_language(text: str, expected: str) -> None:
    assert detect_language(text) == expected


def test_detect_language_threshold_is_one_fifth() -> None:
    # 1 CJK character per 4 Latin letters is exactly the threshold.
    assert detect_language("中abcd") == "zh"
    assert detect_language("中abcde") == "en"


def test_count_cjk_counts_ideographs_only() -> None:
    assert count_cjk("NR500 机器人，续航8小时。") == 7
    assert count_cjk("no chinese here") == 0


# -- estimate_tokens ---------------------------------------------------------------------

ENGLISH_PARAGRAPH = (
    "When you want to take time off, tell your manager at least two weeks in advance. "
    "Most requests are approved within a day or two, and you will get an email when it is "
    "done. If you are sick, call in before your shift starts and we will sort out the rest "
    "later."
)


def test_estimate_tokens_english_prose_is_about_1_3_per_word() -> None:
    words = len(ENGLISH_PARAGRAPH.split())
    tokens = estimate_tokens(ENGLISH_PARAGRAPH)
    assert words == 53
    assert 1.1 * words <= tokens <= 1.5 * words


def test_estimate_tokens_word_rule() -> None:
    assert estimate_tokens("a") == 1
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("internationalisation") == 5  # 20 chars -> 5
    assert estimate_tokens("3.14") == 1
    assert estimate_tokens("") == 0
    assert estimate_tokens("   \n\t ") == 0


def test_estimate_tokens_chinese_is_one_per_character() -> None:
    text = "员工工作满一年后享有带薪年假"
    assert estimate_tokens(text) == len(text) == 14


def test_estimate_tokens_mixed_text() -> None:
    # 3 CJK characters + "NR500" (2) + "8" (1)
    assert estimate_tokens("NR500机器人8") == 3 + 2 + 1
    assert estimate_tokens("机器人 NR500") == 3 + 2


# -- split_sentences ---------------------------------------------------------------------


def test_split_sentences_chinese_marks() -> None:
    assert split_sentences("第一句。第二句！第三句？第四句；第五句") == [
        "第一句。",
        "第二句！",
        "第三句？",
        "第四句；",
        "第五句",
    ]


def test_split_sentences_english_marks() -> None:
    assert split_sentences("First one. Second one! Third one? Fourth") == [
        "First one.",
        "Second one!",
        "Third one?",
        "Fourth",
    ]


def test_split_sentences_keeps_decimals_and_versions_whole() -> None:
    assert split_sentences("Pi is 3.14 today. Version 2.0.1 costs $3.50 now.") == [
        "Pi is 3.14 today.",
        "Version 2.0.1 costs $3.50 now.",
    ]
    assert split_sentences("价格为3.14元。下一句") == ["价格为3.14元。", "下一句"]


def test_split_sentences_period_without_space_does_not_split() -> None:
    assert split_sentences("see example.com for details.") == ["see example.com for details."]


def test_split_sentences_mixed_languages() -> None:
    text = "The NR500 robot carries 300 kg. 它每次充电可运行8小时。Battery life is 8 h! 完毕"
    assert split_sentences(text) == [
        "The NR500 robot carries 300 kg.",
        "它每次充电可运行8小时。",
        "Battery life is 8 h!",
        "完毕",
    ]


def test_split_sentences_strips_and_drops_empty() -> None:
    assert split_sentences("  \n ") == []
    assert split_sentences("") == []
    assert split_sentences("  One.   Two.  ") == ["One.", "Two."]
    assert split_sentences("第一句。  第二句。") == ["第一句。", "第二句。"]


def test_split_sentences_question_mark_inside_url_does_not_split() -> None:
    text = "See https://example.com/search?q=leave for details."
    assert split_sentences(text) == [text]
