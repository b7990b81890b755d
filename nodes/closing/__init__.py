"""Closing a turn: the answer from one model call, and the run's status."""
