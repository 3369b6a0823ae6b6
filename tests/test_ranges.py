"""Which table row a quantity of the question falls in (tools.policy.ranges), and the
offline answer that quotes that row instead of the whole table."""

from __future__ import annotations

import math

import pytest

from tools.policy.offline import extractive_answer
from tools.policy.ranges import Range, key_range, matching_row, quantities

LEAVE_EN = (
    "| Years of service | Annual leave per year |\n|---|---|\n"
    "| Less than 1 year | 10 days, pro-rated from the start date |\n"
    "| 1 to less than 3 years | 12 days |\n| 3 to less than 5 years | 15 days |\n"
    "| 5 to less than 10 years | 18 days |\n| 10 years or more | 22 days |\n"
)
LEAVE_ZH = (
    "| 司龄 | 年假天数 |\n|---|---|\n| 不满1年 | 10天，按入职日期折算 |\n"
    "| 满1年不满3年 | 12天 |\n| 满3年不满5年 | 15天 |\n| 满5年不满10年 | 18天 |\n"
    "| 满10年及以上 | 22天 |\n"
)


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("Less than 1 year / 10 days", Range(high=1, high_closed=False)),
        ("1 to less than 3 years / 12 days", Range(1, 3, True, False)),
        ("10 years or more / 22 days", Range(low=10)),
        ("Up to 3 working days / 5 days", Range(high=3)),
        ("4 to 10 working days / 15 days", Range(4, 10)),
        ("More than 10 working days / 30 days", Range(low=10, low_closed=False)),
        ("Up to 2,000 / None", Range(high=2000)),
        ("2,000 to 50,000 / 1 quotation", Range(2000, 50000)),
        ("不满1年 / 10天", Range(high=1, high_closed=False)),
        ("满1年不满3年 / 12天", Range(1, 3, True, False)),
        ("满10年及以上 / 22天", Range(low=10)),
        ("4至10个工作日 / 提前15个工作日", Range(4, 10)),
    ],
)
def test_a_key_cell_names_its_range(row: str, expected: Range) -> None:
    assert key_range(row) == expected


@pytest.mark.parametrize(
    "row", ["P3 – Medium / 4 hours", "E-118 / lost", "Operating temperature / 0 °C to 45 °C"]
)
def test_a_key_cell_that_is_a_name_is_no_range(row: str) -> None:
    assert key_range(row) is None


def test_bounds_are_open_or_closed_as_written() -> None:
    below = Range(high=1, high_closed=False)
    assert 0.5 in below and 1 not in below and -math.inf in below
    assert 3 in Range(1, 3) and 3 not in Range(1, 3, True, False)


def test_quantities_keep_units_and_leave_codes_out() -> None:
    assert quantities("How many days after 6 years of service?") == [(6.0, "years")]
    assert quantities("司龄满10年的员工") == [(10.0, "年")]
    assert quantities("What does F-37 mean on an NR-500?") == []
    assert quantities("a purchase of 12,500") == [(12500.0, "")]
    assert quantities("leave taken in 2025, before 2025-12-31 or 21:00, on v3.2.1?") == []
    assert quantities("a 15% discount from 2025年") == [(15.0, "%"), (2025.0, "年")]


def test_one_row_or_none() -> None:
    rows = [
        (r, f"Years of service {r}")
        for r in [
            "Less than 1 year / 10 days",
            "5 to less than 10 years / 18 days",
            "10 years or more / 22 days",
        ]
    ]
    assert matching_row(rows, [(6.0, "years")]) == 1
    assert matching_row(rows, [(10.0, "years")]) == 2
    # A quantity in another unit says nothing about these rows.
    assert matching_row(rows, [(6.0, "kg")]) is None
    # On a boundary both closed ranges hold it: no single row, the whole table is kept.
    amounts = [("Up to 2,000 / none", "Amount"), ("2,000 to 50,000 / one", "Amount")]
    assert matching_row(amounts, [(2000.0, "")]) is None
    assert matching_row(amounts, [(500.0, "")]) == 0
    # One parsable row is no column of ranges.
    assert matching_row([("Less than 1 year / x", ""), ("Other / y", "")], [(0.5, "")]) is None


@pytest.mark.parametrize(
    ("question", "text", "language", "expected"),
    [
        (
            "How many days of annual leave after 6 years of service?",
            LEAVE_EN,
            "en",
            "5 to less than 10 years / 18 days [internal-1]",
        ),
        ("司龄满10年的员工有多少天年假？", LEAVE_ZH, "zh", "满10年及以上 / 22天 [内部-1]"),
        ("司龄6个月的员工有多少天年假？", LEAVE_ZH, "zh", None),  # 月 is not the column's unit
    ],
)
def test_the_offline_answer_quotes_the_row_the_quantity_falls_in(
    question: str, text: str, language: str, expected: str | None
) -> None:
    label = "[internal-1]" if language == "en" else "[内部-1]"
    sources = [{"label": label, "text": text, "relevance": 1.0}]
    answer = extractive_answer(question, sources, language, max_sentences=1)
    if expected is None:  # no quantity in the column's unit: the whole table, as before
        assert answer.count(";") >= 4, answer
    else:
        assert answer == expected
