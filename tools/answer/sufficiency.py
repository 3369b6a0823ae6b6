"""The model's own judgement of whether the sources hold the answer (issue 56): read its
one-word reply. The call is ``nodes.sufficiency_check``'s; this is the domain part, pure.

The word rules of ``tools.policy.relevance`` cannot see that a passage on the topic
does not give the answer when it shares the question's words (RGB zh's negatives: news
of the same event) or says it in another language; a model reading the passages can.
"""

from __future__ import annotations

import re

# The reply is one word; a few more tokens let a model write "Yes." or "是的" without
# being cut, and bound the call.
MAX_TOKENS = 4
_NO = re.compile(r"(?:no|not|none)\b|否|不|没|无")
_YES = re.compile(r"yes\b|是|有|包含|能|可以")
_LEADING = re.compile(r"^[\s\"'“”‘’*`#>(（\[【:：-]+")


def verdict(reply: str) -> bool | None:
    """True when the reply says the sources state the answer, False when it says they do
    not, None when it says neither (then the check does not decide)."""
    text = _LEADING.sub("", reply).casefold()
    if _NO.match(text):  # "不是", "没有": a no that holds a yes word
        return False
    if _YES.match(text):
        return True
    return None
