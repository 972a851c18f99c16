"""Hand a run to the systems operators already watch: Prometheus metrics and alerting rules."""

from sweep.export.prometheus import metrics_text, write_output
from sweep.export.rules import rules_text

__all__ = ["metrics_text", "rules_text", "write_output"]
