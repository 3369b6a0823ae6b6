"""Rules that stand in for a model: routing, rewriting, grading, extractive answers.

``offline`` holds the deterministic no-LLM strategies both graphs fall back to, and the
routing thresholds on the knowledge base's calibrated probe; ``untrusted`` what retrieved
text may not become in an answer (a quoted instruction, markup).
"""
