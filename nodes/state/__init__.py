"""The agent's state and configuration: `AgentState` and its step records, `Context`, the reflection verdict."""
