"""Plan-and-Solve nodes: plan, execute_step, observe (settles a step), replan, solve, and their state."""
