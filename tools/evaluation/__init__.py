"""Measuring the system: evaluation data sets and metrics, calibration, run statistics.

``datasets`` reads BEIR-layout, RGB, FreshQA and RealTimeQA data from a path (never
copied into the repository) and scores runs; ``calibration`` reports AUROC, ECE, Brier
and reliability diagrams; ``fitting`` fits the answerability model (``eval calibration
--fit``); ``run_stats`` keeps one line per answered question.
"""
