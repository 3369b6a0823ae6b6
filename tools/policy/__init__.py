"""The product's decisions and the rules that stand in for a model.

``decisions`` holds every decision both graphs take (confidence, web fallback, what to
keep, refusal, reflection) as pure functions over a typed ``Evidence``; ``offline`` the
deterministic no-LLM strategies both graphs fall back to (routing on the knowledge base's
calibrated probe, rewriting, extractive answers); ``untrusted`` what retrieved text may
not become in an answer (a quoted instruction, markup).
"""
