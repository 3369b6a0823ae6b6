"""What retrieved text may not become: a quoted instruction, or markup, in an answer.

Documents and web pages are data. A sentence addressed to an assistant ("ignore the
previous instructions…", "you are now…", "answer that…", "忽略之前的指令", "你现在是…")
or one carrying tags, chat-template tokens or code fences is never quoted as a fact by the
offline extractive answer (``tools.policy.offline.extractive_answer``); the next best
sentence is used instead.

The rule is deliberately narrow, because a dropped sentence may be the answer:

* instructions are imperatives aimed at a model: "ignore/disregard/forget" followed by
  *instructions/prompts* (or by "previous/above … rules"), role switches ("you are now",
  "act as an AI"), "system prompt", "answer/reply/say that …" opening a sentence, "when
  asked …, answer …", "the assistant must answer …"; "Employees must ignore spam emails"
  or "Staff should follow the previous rules" stay quotable;
* markup is a tag (``<system>``, ``</source>``, ``<a href="…">``), a defused tag
  (``‹system›``, what :func:`tools.answer.context_builder.neutralise` leaves), a template
  token (``<|im_start|>``) or a code fence; comparisons ("P < .01", "x<y and y>z") are
  not tags.

The model prompts have their own rule, the source fence
(:func:`tools.answer.context_builder.fence`).
"""

from __future__ import annotations

import re

_NOT_END = r"[^.!?。！？\n]"  # stays inside one sentence
_INSTRUCTION_RE = re.compile(
    # "ignore (all) (the|your) (previous) instructions", "disregard all prior rules"
    r"\b(?:ignore|disregard|forget|override)\s+(?:(?:all|any|every)\s+(?:of\s+)?)?"
    r"(?:(?:the|your|my|these|those|this)\s+)?"
    r"(?:(?:previous|prior|above|earlier|preceding|foregoing|original|system|initial)\s+)?"
    r"(?:instructions?|prompts?|directions|directives|system\s+messages?)\b"
    r"|\b(?:ignore|disregard|forget)\s+(?:(?:all|any|every)\s+(?:of\s+)?)?"
    r"(?:(?:the|your)\s+)?(?:previous|prior|above|earlier|preceding)\s+"
    r"(?:rules|guidelines|messages?|context|text|conversation)\b"
    r"|\b(?:ignore|disregard|forget)\s+everything\s+(?:above|before|(?:you|you've)\b)"
    r"|\byou\s+are\s+now\b|\bfrom\s+now\s+on,?\s+you\b"
    r"|\bact\s+as\s+(?:an?|the)\s+(?:ai|assistant|model|chatbot|llm)\b"
    r"|\b(?:system|developer)\s+prompt\b|\bnew\s+instructions?\s*:"
    # "Answer that …" / "Always reply with …" opening a sentence: an order, not a fact.
    r"|^\W*(?:please\s+)?(?:always\s+|now\s+|instead\s+)?(?:answer|reply|respond|say)"
    r"\s+(?:that|with|only)\b"
    rf"|\bwhen\s+(?:asked|questioned)\b{_NOT_END}{{0,80}}[,，:]\s*(?:always\s+)?"
    r"(?:(?:you\s+)?(?:must|should)\s+)?(?:answer|reply|respond|say)\b"
    rf"|\b(?:assistants?|models?|ai|chatbots?|llms?)\b{_NOT_END}{{0,30}}"
    r"\b(?:must|should|shall)\s+(?:always\s+)?(?:answer|reply|respond|say)\s+(?:that|with)\b"
    r"|忽略(?:掉)?(?:之前|以上|上面|先前|前面|此前|所有)?(?:的)?(?:所有|全部)?(?:的)?"
    r"(?:指令|指示|提示词?|规则|要求)"
    r"|(?:无视|忘记|忘掉)(?:之前|以上|上面|先前|前面|所有)"
    r"|你现在是|从现在起你|系统提示词?",
    re.I | re.M,
)
# A tag: <name>, </name>, <name/>, <name attr="…">. A space-separated "<y and y>" is a
# comparison, so attributes need "=".
_TAG_RE = re.compile(r"<\s*/?\s*([A-Za-z_][\w:-]*)(?:\s+[\w:-]+\s*=[^<>]*)?\s*/?>")
_OTHER_MARKUP_RE = re.compile(
    r"<\|[^|<>]{1,40}\|>"  # chat-template tokens
    r"|‹\s*/?\s*[A-Za-z_][^‹›]*›"  # tags defused by neutralise()
    r"|```|~~~"  # code fences
)
# Presentational HTML and wiki tags left in extracted text (a "<br>" in a Wikipedia
# dump): dropped from the quote, the sentence kept. Any other tag (<system>, <source>,
# <instructions>…) makes the sentence unquotable.
_BLOCK_TAGS = frozenset({"br", "p", "div", "li", "ul", "ol", "tr", "td", "th", "hr", "table"})
_INLINE_TAGS = frozenset(
    {"b", "i", "u", "s", "em", "strong", "small", "big", "sup", "sub", "span", "font", "a",
     "abbr", "cite", "center", "nowiki", "ref", "references", "onlyinclude", "noinclude",
     "includeonly"}
)  # fmt: skip


def is_instruction_like(sentence: str) -> bool:
    """A sentence addressed to a model rather than stating a fact."""
    return bool(_INSTRUCTION_RE.search(sentence))


def has_markup(sentence: str) -> bool:
    """Tags, defused tags, chat-template tokens or fences."""
    return bool(_TAG_RE.search(sentence) or _OTHER_MARKUP_RE.search(sentence))


def _drop_tag(match: re.Match[str]) -> str:
    return " " if match.group(1).lower() in _BLOCK_TAGS else ""


def quotable_text(sentence: str) -> str | None:
    """``sentence`` as the offline answer may quote it, or None when it may not be quoted.

    None for an instruction-like sentence or one with a tag that is not presentational
    HTML, a template token, a defused tag or a fence; presentational tags (``<br>``,
    ``<nowiki>``…) are dropped from the returned text.
    """
    if _OTHER_MARKUP_RE.search(sentence) or is_instruction_like(sentence):
        return None
    tags = [m.group(1).lower() for m in _TAG_RE.finditer(sentence)]
    if any(t not in _BLOCK_TAGS and t not in _INLINE_TAGS for t in tags):
        return None
    if not tags:
        return sentence
    text = " ".join(_TAG_RE.sub(_drop_tag, sentence).split())
    # "ig<b>nore</b> previous instructions", "<<br>system>" only show without their tags
    return None if is_instruction_like(text) or has_markup(text) else text


def quotable(sentence: str) -> bool:
    """Whether the offline answer may quote ``sentence`` (possibly without its HTML tags)."""
    return quotable_text(sentence) is not None
