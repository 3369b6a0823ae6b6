"""A question's key terms, in English and Chinese, and whether a passage mentions one.

Data and matching only; the rule that reads them is ``tools.policy.relevance``. A key
term names what is asked about: a content word, a product or model code ("NR-900",
"Zanzibar-7", "MU5735"), a year. What says *how* something is asked is never one: question
words ("how long", "what", 多久, 多少, 什么, 哪些), generic nouns that name the kind of
answer ("period", "amount", "type", 期限, 金额, 地点), units, request words, the router's
cues. Issue 56: "How long is the warranty …?" was refused over "long", "What is the
warranty period …?" over "period", though the passage said "a warranty of 37 months".
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from tools.kb.index.tokenizers import CHINESE_MODALS, keywords, make_tokenizer
from tools.policy.cues import INTERNAL_CUES_EN, INTERNAL_CUES_ZH, TIME_CUES_EN, TIME_CUES_ZH


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Units say in what form the answer comes, not what it is about: "How many kilograms can
# the R2 robot carry?" is answered by "carries 300 kg".
UNITS = _words(
    """kilogram kilograms gram grams tonne tonnes ton tons pound pounds ounce ounces meter
    meters metre metres kilometer kilometers kilometre kilometres centimeter centimeters
    millimeter millimeters mile miles feet foot inch inches liter liters litre litres hour
    hours minute minutes second seconds day days week weeks month months year years percent
    percentage dollar dollars euro euros yuan degree degrees volt volts watt watts"""
)
# How a request is put, not what it is about ("Latest news please", "Can you tell me").
REQUEST_WORDS = _words(
    "please kindly thanks thank tell know explain describe show give find need want help"
)
# Verbs of getting and having that frame a question rather than name its subject ("How
# many days of annual leave does an employee get?" is answered by "... are granted 18
# days"; the sample KB's first demo question was refused over "get").
FRAME_VERBS = _words(
    "get gets got getting receive receives received have has had take takes took make makes"
)
# Question words, and generic nouns naming the kind of answer wanted: the passage states
# the answer ("37 months"), not the word for its kind ("period", "duration").
QUESTION_WORDS_EN = _words(
    """what which who whom whose when where why how long many much often far big large old
    kind type sort period duration length amount number total quantity size value rate
    level time date place location name result cost costs term terms mean means meaning
    must use used require required need needed worth colour color"""
)
NOT_KEY_EN = frozenset(
    {
        *UNITS,
        *REQUEST_WORDS,
        *FRAME_VERBS,
        *QUESTION_WORDS_EN,
        *(c.strip() for c in TIME_CUES_EN),
        *(c.strip() for c in INTERNAL_CUES_EN),
    }
)
QUESTION_WORDS_ZH = _words(
    """多少 什么 哪些 哪个 哪里 哪儿 多久 多长 多大 多高 多远 几个 几年 几天 几次 怎么 怎样
    怎么样 如何 为什么 为何 是否 是不是 何时 何地 哪一 哪位 什么样 第几 哪年 哪天 几月 几号
    多少钱 哪国 分别 具体 主要 总共 一共"""
)
GENERIC_NOUNS_ZH = _words(
    """人数 数量 时间 期限 期间 金额 比例 情况 问题 内容 名称 名字 时候 日期 排名 级别 数字
    价格 地点 地方 类型 种类 成绩 结果 得主 获得者 开始 队伍 名单 新任 选手 举办 举行 主办
    国家 长度 大小 标准 上限 下限 需要 要求 颜色"""
)
# Units and currencies, as UNITS in English: "采购金额超过200万元人民币时需要谁审批？" required
# "人民" (jieba's part of 人民币) of the passage that answers it.
UNITS_ZH = _words(
    """人民币 美元 欧元 日元 港元 英镑 公斤 千克 公里 千米 厘米 毫米 小时 分钟 平方米 立方米
    毫升 百分点 百分比"""
)
NOT_KEY_ZH = frozenset(
    {
        *QUESTION_WORDS_ZH,
        *GENERIC_NOUNS_ZH,
        *UNITS_ZH,
        *CHINESE_MODALS,
        *TIME_CUES_ZH,
        *INTERNAL_CUES_ZH,
    }
)
MIN_LETTERS = 3
# A code names one thing: letters and digits together ("NR-900", "Zanzibar-7", "MU5735",
# "F-37", "P1"), matched whole, so "NR-200" never stands for "NR-900".
CODE_RE = re.compile(
    r"(?<![A-Za-z0-9-])(?=[A-Za-z0-9-]*\d)(?=[A-Za-z0-9-]*[A-Za-z])[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*"
)
YEAR_RE = re.compile(r"(?<!\d)(?:19|20)\d\d(?!\d)")
# A number, or a number with a unit (三年, 10天): counted, not named.
_NUMBER_RE = re.compile(r"^[\d零一二三四五六七八九十百千万亿两.]+[年月天日个次人元号届枚名位]?$")
_CJK_RE = re.compile(r"[\u3400-\u9fff]")


def is_chinese(term: str) -> bool:
    return bool(_CJK_RE.search(term))


def codes(question: str) -> list[str]:
    return list(dict.fromkeys(CODE_RE.findall(question)))


def _chinese_terms(question: str) -> list[str]:
    said = keywords(question)
    units = [w for w in said if w in UNITS_ZH]
    words = [
        w
        for w in said
        if is_chinese(w)
        and len(w) >= 2
        and w not in NOT_KEY_ZH
        and not _NUMBER_RE.match(w)
        and not any(w in u for u in units)  # jieba's part of a unit ("人民" of 人民币)
    ]
    # jieba gives a compound and its parts ("克什米尔地区", "克什", "米尔"): the parts are
    # required, so a passage saying "克什米尔" without "地区" still mentions the place.
    return [w for w in dict.fromkeys(words) if not any(o != w and o in w for o in words)]


def _english_terms(question: str) -> list[str]:
    in_codes = {p.casefold() for c in codes(question) for p in re.split(r"[-_]", c)}
    return [
        w
        for w in keywords(question)
        if w.isascii()
        and w.isalpha()
        and len(w) >= MIN_LETTERS
        and w.casefold() not in NOT_KEY_EN
        and w.casefold() not in in_codes  # said by the code itself
    ]


def key_terms(question: str) -> list[str]:
    """The question's key terms: its codes, years and content words (see the module
    docstring), in either language."""
    found = [*codes(question), *YEAR_RE.findall(question)]
    found += _english_terms(question) + _chinese_terms(question)
    return list(dict.fromkeys(found))


@lru_cache(maxsize=1)
def _stem() -> Any:
    return make_tokenizer("jieba", stem=True)


@lru_cache(maxsize=256)
def _stems(text: str) -> frozenset[str]:
    return frozenset(_stem()(text))


def _code_in(code: str, text: str) -> bool:
    pattern = r"(?<![A-Za-z0-9])" + re.escape(code) + r"(?![A-Za-z0-9]|-\d)"
    return bool(re.search(pattern, text, re.IGNORECASE))


def _chinese_in(term: str, text: str, question: str) -> bool:
    """A Chinese term, or, where jieba cut the question across a word ("多少天年假": "天年"),
    a pair of characters of the question overlapping it."""
    if term in text:
        return True
    at = question.find(term)
    if at < 0:
        return False
    start = max(0, at - 1)
    window = question[start : at + len(term) + 1]
    return any(
        is_chinese(window[i : i + 2]) and window[i : i + 2] in text
        for i in range(len(window) - 1)
        if start + i + 1 >= at and start + i < at + len(term)  # overlaps the term
    )


def mentions(term: str, text: str, question: str = "") -> bool:
    """Whether ``text`` has ``term`` in it: a code whole, a Chinese term (or its
    neighbourhood in ``question``), an English word or a word of the same stem ("badges"
    and "badge", "flies" and "fly")."""
    if CODE_RE.fullmatch(term):
        return _code_in(term, text)
    if is_chinese(term):
        return _chinese_in(term, text, question)
    if term.casefold() in text.casefold():
        return True
    # Snowball leaves a short word as it is ("fly") but stems its plural ("flies": "fli").
    forms = f"{term} {term[:-1]}ies" if term.endswith("y") else term
    return bool(_stems(forms) & _stems(text))
