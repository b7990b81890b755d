"""Chat models the agent runs on: the model loader (offline, OpenAI, Anthropic) and the scripted offline model."""
