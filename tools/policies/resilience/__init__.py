"""Resilience: the steps that keep a failing or slow tool from taking the run down with it (circuit breaker,
concurrency limit, timeout, retry) and the boundary that turns whatever a tool raises into a result
(normalise, with containment telling a tool's own failure from the caller stopping the run)."""
