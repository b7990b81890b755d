"""The tool round every paradigm shares: approve, act (through the gateway), observe, and the loop guard."""
