"""How a node runs: the node driver, the services a compiled graph shares, model retries, budgets, fallback logs."""
