"""ReAct nodes: think, reflect, finalize (the tool round, act and observe, is shared)."""
