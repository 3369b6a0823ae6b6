"""What retrieved text may not become: a quoted instruction, or markup, in an answer.

Documents and web pages are data. A sentence addressed to an assistant ("ignore the
previous instructions…", "you are now…", "忽略之前的指令") or one carrying tags and
template tokens is never quoted as a fact by the offline extractive answer; the next best
sentence is used instead. The rule is deliberately narrow (imperatives aimed at a model,
tag-like fragments): ordinary sentences, including ones that mention instructions or
systems, stay quotable. The model prompts have their own rule, the source fence
(``tools.answer.context_builder.fence``).
"""

from __future__ import annotations

import re

_INSTRUCTION_RE = re.compile(
    r"\b(?:ignore|disregard|forget|override)\b[^.!?。！？]{0,40}"
    r"\b(?:instructions?|prompts?|rules|guidelines|above|previous|prior|context)\b"
    r"|\byou are now\b|\bact as (?:an?|the) (?:ai|assistant|model|chatbot)\b"
    r"|\b(?:system|developer) (?:prompt|message|instructions?)\b"
    r"|\b(?:assistant|model|ai|chatbot|llm)s?\b[^.!?]{0,30}\b(?:must|should|shall) "
    r"(?:answer|reply|respond|say|output)\b"
    r"|\bwhen (?:asked|questioned)\b[^.!?]{0,80}\b(?:answer|reply|respond|say)\b"
    r"|忽略(?:之前|以上|上面|先前|前面)?(?:的)?(?:所有)?(?:指令|指示|提示|规则)"
    r"|你现在是|无视(?:之前|以上|上面)|系统提示",
    re.I,
)
_MARKUP_RE = re.compile(r"</?[A-Za-z_][\w:-]*(?:\s[^<>]*)?/?>|<\|[^|<>]{1,40}\|>|‹/?\w+[^‹›]*›|```")


def is_instruction_like(sentence: str) -> bool:
    """A sentence addressed to a model rather than stating a fact."""
    return bool(_INSTRUCTION_RE.search(sentence))


def has_markup(sentence: str) -> bool:
    """Tags, defused tags or chat-template tokens: never quoted into an answer."""
    return bool(_MARKUP_RE.search(sentence))


def quotable(sentence: str) -> bool:
    return not (is_instruction_like(sentence) or has_markup(sentence))
