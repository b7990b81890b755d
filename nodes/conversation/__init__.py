"""The conversation: reading the current turn, what counts as a question, the memory nodes around a turn."""
