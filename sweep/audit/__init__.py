"""Audits over time and against intent: probe diffs, run diffs, expectations, baselines."""
