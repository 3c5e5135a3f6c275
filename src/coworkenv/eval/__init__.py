"""Evaluation: metrics (score, Pass@k, Pass^k) and reports."""
