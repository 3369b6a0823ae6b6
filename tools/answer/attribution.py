"""Labels for the sentences of a model's answer that cite no source, from the sources
they repeat.

A small model often writes the right sentence without its label ("The NR-200's rated
payload is 300 kg.", "司龄满10年的员工每年可以休22天年假。"): the refusal rule
(``tools.policy.refusal``, rule 2: an answer with no valid citation is unsupported) then
replaced a correct answer by "No relevant information found" (issue 56: 3 of 6 agent runs).
The passages the model was shown are known, so each unlabeled sentence gets the label of
the passage that holds what it says: its new terms (those that are not the question's)
mostly, and every number it states. A sentence no passage supports stays unlabeled, and
the refusal rule judges the answer as before: only what the evidence does not support is
refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from tools.kb.index.tokenizers import make_tokenizer
from tools.policy.refusal import is_refusal, source_text
from tools.text import LABEL_RE

# At least this share of a sentence's new terms must occur in the passage it is given:
# the refusal rule's own floor is 0.3 for a whole answer; a single sentence is held to
# more than half, so a label is attached only where the passage plainly holds the claim.
MIN_SHARE = 0.6
_SENTENCE_RE = re.compile(r"[^.!?。！？\n]+(?:[.!?。！？]+|$)")
_NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)*")
_END_RE = re.compile(r"([.!?。！？]*)\s*$")


@lru_cache(maxsize=1)
def _tokenize() -> Any:
    return make_tokenizer("jieba", stem=True)


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER_RE.findall(text)}


def _best_source(
    sentence: str, asked: set[str], sources: Sequence[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The source holding the sentence's claim: every number it states and most of its
    new terms (the best share wins; ties go to the earlier, better ranked, source)."""
    tokenize = _tokenize()
    new = {t for t in tokenize(sentence) if t not in asked}
    numbers = _numbers(sentence)
    if not new and not numbers:
        return None  # a sentence that only repeats the question says nothing to source
    best: tuple[float, Mapping[str, Any]] | None = None
    for src in sources:
        text = source_text(src)
        if not numbers <= _numbers(text):
            continue
        share = len(new & set(tokenize(text))) / len(new) if new else 1.0
        if share >= MIN_SHARE and (best is None or share > best[0]):
            best = (share, src)
    return best[1] if best else None


def attach_labels(
    answer: str, question: str, sources: Sequence[Mapping[str, Any]]
) -> tuple[str, int]:
    """``answer`` with the label of its source at the end of each sentence that cites
    none and that a source supports, and how many labels were attached. A refusal, or an
    answer with no sentence to attribute, comes back unchanged."""
    labelled = [s for s in sources if s.get("label")]
    if not labelled or not answer.strip() or is_refusal(answer):
        return answer, 0
    asked = set(_tokenize()(question))
    out: list[str] = []
    attached = 0
    position = 0
    for match in _SENTENCE_RE.finditer(answer):
        out.append(answer[position : match.start()])
        sentence = match.group(0)
        position = match.end()
        if LABEL_RE.search(sentence) or not sentence.strip():
            out.append(sentence)
            continue
        src = _best_source(sentence, asked, labelled)
        if src is None:
            out.append(sentence)
            continue
        end = _END_RE.search(sentence)
        cut = end.start() if end else len(sentence)
        out.append(f"{sentence[:cut].rstrip()} {src['label']}{end.group(1) if end else ''}")
        attached += 1
    out.append(answer[position:])
    return "".join(out), attached
