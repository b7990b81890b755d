"""The service: an Agent-Server-compatible HTTP API (`app`) and the workers that execute its runs (`worker`),
sharing everything through Redis (`records`, `work_queue`, `events`, `threads`)."""
