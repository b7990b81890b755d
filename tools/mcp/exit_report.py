"""Run a stdio MCP server as a child and, when it ends, say how on stderr: the one fact mcp's stdio transport
keeps to itself. A server that exits before the handshake (a bad token, `/bin/false`) otherwise surfaces only
as a closed stream; with this line the start error names the exit status (or the signal).

Run by path with the interpreter's `-I -S` (stdlib only, nothing of the project imported, ~15 ms):
    python -I -S exit_report.py COMMAND [ARG...]
stdin and stdout are the child's own (inherited, not copied), so the MCP traffic never passes through here.
"""

import signal
import subprocess
import sys

MARKER = "[reactgraph: the MCP server "  # the line's start, which server.py looks for


def main(argv: list[str]) -> int:
    try:
        child = subprocess.Popen(argv)
    except OSError as exc:
        print(f"{MARKER}could not be run: {exc.strerror or exc}: {argv[0]!r}]", file=sys.stderr, flush=True)
        return 127
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # what stops us stops the server
        signal.signal(sig, lambda number, _frame: child.send_signal(number))
    status = child.wait()
    how = f"was killed by {signal.Signals(-status).name}" if status < 0 else f"exited with status {status}"
    print(f"{MARKER}{how}]", file=sys.stderr, flush=True)
    return 128 - status if status < 0 else status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]) if len(sys.argv) > 1 else 2)
