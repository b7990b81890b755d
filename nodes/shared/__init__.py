"""What the three paradigms share: state, Context, prompts, the tool round (act, observe), memory nodes."""
