"""What people said of the answers: thumbs up or down with a comment, per user
(``store``), the numbers ``hybrid-rag stats`` shows (``report``), and the evaluation data
set they make (``export``)."""
