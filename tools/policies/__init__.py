"""The gateway's pipeline steps, grouped by concern; `ToolGateway` chains them (tools/gateway.py states the order).

- `base`: what every step shares (`CallContext`, `Policy`, `chain`).
- `guards/`: whether a call may run at all, and how much of its result may leave.
- `resilience/`: keeping a failing or slow tool from taking the run down, and turning what it raises into a result.
- `observability/`: spans, logs, metrics and events about the calls, without changing them.
- `invoke`: the end of the chain, where the tool itself runs.
"""
