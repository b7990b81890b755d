"""Node functions of the graphs, grouped by paradigm (react, plan_solve, reflexion) and what they share."""
