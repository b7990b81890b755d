"""`reactgraph studio`: the LangGraph dev server on react-graph's graphs (`launcher`) and its Redis persistence
(`persistence`, which langgraph.json names)."""
