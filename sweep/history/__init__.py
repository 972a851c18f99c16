"""Runs as a history: an index of every run folder, per-host timelines and change points, drift
under load against each host's own first runs, and a page (`sweep history`)."""

from sweep.history.build import History, build, build_history
from sweep.history.index import HistoryIndex, default_index_path, run_folders

__all__ = ["History", "HistoryIndex", "build", "build_history", "default_index_path", "run_folders"]
