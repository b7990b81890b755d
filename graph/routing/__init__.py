"""Where each graph goes next: pure functions of state and context, one per conditional edge, in one module
per paradigm (`react`, `plan_solve`, `reflexion`) and one for the tool round they share (`tool_round`)."""
