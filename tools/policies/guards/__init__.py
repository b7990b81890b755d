"""Guards: the steps that decide whether a call may run at all (existence, permission, argument validation,
approval) and how much of its result may leave the gateway (result limit)."""
