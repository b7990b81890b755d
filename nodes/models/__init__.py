"""Chat models the agent can run on: the scripted offline model and (later) factories for real providers."""
