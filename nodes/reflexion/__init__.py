"""Reflexion nodes: load_lessons, trial, evaluate, self_reflect, and their state."""
