"""Observability: what the pipeline tells about the calls it runs, without changing them: a span per call
(spans), a log record and per-tool metrics (telemetry, kept in a metrics store), and the gateway events the
other steps send to a caller's sink (events)."""
