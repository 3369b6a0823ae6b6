"""The refusal rule of model-written answers (tools/policy/refusal.py), and through ``cite``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graph import Context, build_graph
from nodes.generate import checked_refusal
from run import resources
from tests.fakes import ScriptedChatModel, grade_every, hash_model
from tools.kb.ingest.loaders import SourceDocument, content_hash
from tools.kb.knowledge_base import KBConfig, KnowledgeBase
from tools.policy.refusal import MIN_SUPPORT, check_answer, is_refusal, support

# Same-event passages without the figure asked for (RGB's "negative" kind), in the
# project's own words.
NEGATIVE = (
    "2022年北京冬奥会于2月4日开幕，共有91个国家和地区的代表团参加。"
    "中国代表团在开幕式上第一个入场的是旗手。"
)
POSITIVE = "2022年北京冬奥会中国代表团共获得9枚金牌，位列金牌榜第三。"
QUESTION = "2022年北京冬奥会中国代表团获得了多少枚金牌？"


def src(label: str, text: str) -> dict[str, Any]:
    return {"label": label, "kind": "internal", "number": int(label[-2]), "text": text}


@pytest.mark.parametrize(
    "text",
    [
        "没找到相关信息。",
        "没有找到相关的信息",
        "来源中没有提到中国代表团的金牌数。",
        "抱歉，无法根据提供的资料回答这个问题。",
        "No relevant information found.",
        "The sources do not mention how many gold medals China won.",
        "The provided context doesn't contain that figure.",
        "I cannot determine this from the passages.",
    ],
)
def test_refusals_in_any_wording_are_recognised(text: str) -> None:
    assert is_refusal(text)


@pytest.mark.parametrize("text", ["中国代表团获得9枚金牌 [内部-1]。", "China won 9 gold medals."])
def test_answers_are_not_refusals(text: str) -> None:
    assert not is_refusal(text)


def test_reworded_refusal_becomes_the_canonical_sentence() -> None:
    got = check_answer("来源中没有提到金牌数。", QUESTION, [], "zh")
    assert got.refused and got.answer == "没找到相关信息。" and got.reason == "refusal reworded"
    exact = check_answer("No relevant information found.", "q?", [], "en")
    assert exact.refused and exact.reason == ""


def test_an_answer_citing_nothing_is_refused() -> None:
    got = check_answer("中国代表团获得了9枚金牌。", QUESTION, [], "zh")
    assert got.refused and got.reason == "the answer cites no source"


def test_an_answer_its_cited_passage_does_not_hold_is_refused() -> None:
    # The model answers from memory and cites an on-topic passage without the figure.
    answer = "中国代表团共获得9枚金牌，位列金牌榜第三 [内部-1]。"
    got = check_answer(answer, QUESTION, [src("[内部-1]", NEGATIVE)], "zh")
    assert got.refused and got.answer == "没找到相关信息。"
    assert got.support < MIN_SUPPORT and "occur in the sources" in got.reason


def test_an_answer_other_given_passages_hold_is_kept() -> None:
    answer = "中国代表团共获得9枚金牌，位列金牌榜第三 [内部-1]。"
    given = [src("[内部-1]", NEGATIVE), src("[内部-2]", POSITIVE)]
    got = check_answer(answer, QUESTION, given[:1], "zh", given=given)
    assert not got.refused


def test_a_short_paraphrase_is_not_judged_by_support() -> None:
    # Two new words ("six", "give") against a table row: too little to measure.
    row = "| 5 to less than 10 years | 18 days |"
    question = "How many days of annual leave after 6 years of service?"
    answer = "Six years of service give 18 days [internal-1]."
    assert not check_answer(answer, question, [src("[internal-1]", row)], "en").refused


def test_a_short_answer_no_passage_holds_is_refused() -> None:
    # Names from the model's memory, cited to an on-topic passage without them.
    got = check_answer("隋文静、韩聪 [内部-1]。", QUESTION, [src("[内部-1]", NEGATIVE)], "zh")
    assert got.refused and got.support == 0.0


def test_a_verdict_is_not_new_content() -> None:
    claim = "Annual leave carries over to the next year."
    passage = "Up to five unused days carry over to the next year."
    for answer in ("Yes [internal-1].", "No [internal-1]."):
        assert not check_answer(answer, claim, [src("[internal-1]", passage)], "en").refused


def test_an_answer_its_cited_passage_holds_is_kept() -> None:
    answer = "中国代表团共获得9枚金牌，位列金牌榜第三 [内部-1]。"
    got = check_answer(answer, QUESTION, [src("[内部-1]", POSITIVE)], "zh")
    assert not got.refused and got.answer == answer and got.support == 1.0


def test_an_english_paraphrase_keeping_the_facts_words_passes() -> None:
    passage = "Employees receive eighteen days of paid annual leave after one year of service."
    answer = "After a year of service, employees are given 18 days of paid leave [internal-1]."
    share, n = support(answer, "How much annual leave do employees get?", [passage])
    assert n >= 3 and share >= MIN_SUPPORT


MEAL_TABLE = "| 城市类别 | 住宿费上限（每晚） | 伙食补助（每天） |\n| 二类城市 | 500元 | 120元 |"
MEAL_QUESTION = "What is the daily meal allowance for a business trip to a second-tier city?"


def test_an_answer_from_passages_in_another_language_is_judged_by_its_figures() -> None:
    """The 1.5B model answered the English question from the Chinese table, rightly, and
    the rule refused it: "only 14% of the answer's terms occur in the sources it cites"
    (an English answer's words are in no Chinese passage). Across languages its numbers
    are what can be checked: the right figure is kept, a figure no passage holds is not."""
    cited = [src("[internal-1]", MEAL_TABLE)]
    right = "The daily meal allowance in a second-tier city is 120 yuan per day [internal-1]."
    got = check_answer(right, MEAL_QUESTION, cited, "en")
    assert not got.refused and got.answer == right, got
    wrong = "The daily meal allowance in a second-tier city is 180 yuan per day [internal-1]."
    got = check_answer(wrong, MEAL_QUESTION, cited, "en")
    assert got.refused and got.support == 0.0, got
    # In the same language as its sources, every new word still counts.
    english = [src("[internal-1]", "Second-tier cities: hotel up to CNY 500 per night.")]
    assert check_answer(right, MEAL_QUESTION, english, "en").refused


def test_cite_replaces_only_the_draft_and_keeps_the_web_note() -> None:
    draft = "The sources do not say."
    state = {
        "question": "Who won?",
        "language": "en",
        "answer": f"{draft}\n\nLive web results were unavailable: web search not configured.",
        "answer_draft": draft,
        "sources": [],
    }
    answer, reason = checked_refusal(state)
    assert answer == (
        "No relevant information found.\n\n"
        "Live web results were unavailable: web search not configured."
    )
    assert reason == "refusal reworded"


def test_offline_answers_pass_the_refusal_rule_unchanged() -> None:
    state = {"question": "q", "answer": "Quoted sentence [internal-1].", "sources": []}
    assert checked_refusal(state) == ("Quoted sentence [internal-1].", "")


# -- through the state graph, with a scripted model -----------------------------------

NEGATIVES = [
    "2022年北京冬奥会于2月4日在国家体育场开幕，共有91个国家和地区的代表团参加。",
    "北京冬奥会花样滑冰比赛在首都体育馆举行，双人滑项目吸引了众多观众。",
    "冬奥会期间，首都体育馆共举办了花样滑冰和短道速滑两个项目的比赛。",
    "双人滑自由滑比赛于2月19日晚进行，现场观众为选手们加油助威。",
    "本届冬奥会共设7个大项、15个分项、109个小项。",
]


@pytest.fixture
def negatives_kb(tmp_path: Path) -> Iterator[KnowledgeBase]:
    kb = KnowledgeBase(KBConfig(home=tmp_path / "home"), embedding_model=hash_model())
    kb.ingest_documents(
        [
            SourceDocument(f"n{i}", f"news/n{i}.md", t, content_hash(t), False)
            for i, t in enumerate(NEGATIVES)
        ]
    )
    resources.register_kb(kb)
    yield kb
    resources.close_all()


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("北京冬奥会双人滑金牌得主是隋文静和韩聪 [内部-1]。", "出现在它引用的来源中"),
        ("资料中没有提到双人滑金牌得主。", "拒答的措辞已统一"),
        ("隋文静和韩聪获得了金牌。", "没有引用任何来源"),
    ],
)
def test_graph_answers_the_negatives_with_the_refusal(
    negatives_kb: KnowledgeBase,
    tmp_path: Path,
    scripted: ScriptedChatModel,
    reply: str,
    reason: str,
) -> None:
    """RGB's negative kind: same-event passages without the answer. Whatever the model
    says, the answer is 没找到相关信息 (and the warning says why)."""
    scripted.structured = {
        "Plan": [{"route": "knowledge", "reason": "r"}],
        "PassageGrades": [grade_every("ambiguous")],
        "Reflection": [{"sufficient": True}],
    }
    scripted.answer = lambda m: reply
    out = asyncio.run(
        build_graph().ainvoke(
            {"question": "北京冬奥会双人滑金牌得主是谁？"},
            context=Context(
                data_home=str(tmp_path / "home"),
                search_provider="none",
                model="custom:scripted",
                crosslingual=False,
            ),
        )
    )
    assert out["answer"].startswith("没找到相关信息。")
    assert out["citations"] == []
    # The warning says why, in the question's language (issue 46).
    assert any(w.startswith("回答已替换为拒答：") and reason in w for w in out["warnings"])
