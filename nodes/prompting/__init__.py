"""What the model reads: prompts, the text ReAct protocol, ReAct markup, untrusted data framed as data."""
