"""An MCP tool call through the gateway vs a direct langchain-mcp-adapters call on a kept session, in one run.

Both sides talk to the same stdio server script (tests/mcp_servers/toy_server.py, FastMCP), each over its own
session kept open for the whole run, and call the same tool (`add`). The direct side is what a user writes
with the adapter: `create_session` + `load_mcp_tools(session)`, then `tool.ainvoke(args)`. The gateway side is
`gateway.execute(call)`: the whole pipeline, then the hop to the MCP loop's thread and back; a third column
calls the gateway's session on that thread without the pipeline, to show which part costs. Batches alternate
(direct first in even rounds) so machine noise hits both alike; per-call medians and means are compared.
Only the ratio is judged, never absolute times (the machine is shared).

    python benchmarks/mcp_calls.py [--quick]

(Not `mcp.py`: a script named so would shadow the `mcp` package it imports.)
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

from reactgraph.tools import ToolGateway
from reactgraph.tools.mcp import loop

SERVER = Path(__file__).resolve().parent.parent / "tests" / "mcp_servers" / "toy_server.py"


async def measure(rounds: int, batch: int) -> dict[str, float]:
    from langchain_mcp_adapters.sessions import create_session
    from langchain_mcp_adapters.tools import load_mcp_tools

    connection = {"transport": "stdio", "command": sys.executable, "args": [str(SERVER), "stdio"]}
    gateway = ToolGateway()
    await gateway.aadd_mcp_servers({"mcpServers": {"toy": {"command": sys.executable,
                                                            "args": [str(SERVER), "stdio"]}}})
    call = {"name": "add", "args": {"a": 20, "b": 22}, "id": "bench"}
    try:
        async with create_session(connection) as session:  # type: ignore[arg-type]
            await session.initialize()
            add = next(tool for tool in await load_mcp_tools(session) if tool.name == "add")

            async def direct() -> float:
                started = time.perf_counter()
                await add.ainvoke({"a": 20, "b": 22})
                return time.perf_counter() - started

            server = gateway.mcp_servers[0]

            async def via_mcp_loop() -> float:  # the session on the MCP loop's thread, without the pipeline
                started = time.perf_counter()
                await loop.run(server.call("add", {"a": 20, "b": 22}))
                return time.perf_counter() - started

            async def through_gateway() -> float:
                started = time.perf_counter()
                result = await gateway.execute(call)
                elapsed = time.perf_counter() - started
                assert result.ok and result.content == "42", result.content
                return elapsed

            for _ in range(max(batch // 5, 3)):  # warm-up: first calls pay for imports and caches
                await direct()
                await via_mcp_loop()
                await through_gateway()
            plain: list[float] = []
            hopped: list[float] = []
            piped: list[float] = []
            for round_no in range(rounds):
                order = [(direct, plain), (via_mcp_loop, hopped), (through_gateway, piped)]
                for run, samples in order if round_no % 2 == 0 else reversed(order):
                    for _ in range(batch):
                        samples.append(await run())
    finally:
        await gateway.aclose()
    return {"n": len(plain), "direct_median_ms": statistics.median(plain) * 1000,
            "gateway_median_ms": statistics.median(piped) * 1000, "hop_median_ms": statistics.median(hopped) * 1000,
            "direct_mean_ms": statistics.fmean(plain) * 1000, "gateway_mean_ms": statistics.fmean(piped) * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls (a smoke run)")
    args = parser.parse_args()
    rounds, batch = (10, 10) if args.quick else (100, 10)  # short batches: drift hits all three alike
    result = asyncio.run(measure(rounds, batch))
    median_ratio = result["gateway_median_ms"] / result["direct_median_ms"]
    mean_ratio = result["gateway_mean_ms"] / result["direct_mean_ms"]
    print(f"MCP tool `add` over stdio, {result['n']:.0f} calls each, kept sessions on both sides")
    print(f"  median per call: direct {result['direct_median_ms']:.3f} ms, gateway {result['gateway_median_ms']:.3f} ms"
          f" → {median_ratio:.2f}×")
    print(f"  mean per call:   direct {result['direct_mean_ms']:.3f} ms, gateway {result['gateway_mean_ms']:.3f} ms"
          f" → {mean_ratio:.2f}×")
    print(f"  median, the session on the MCP loop's thread without the pipeline: {result['hop_median_ms']:.3f} ms"
          f" → {result['hop_median_ms'] / result['direct_median_ms']:.2f}× (where the difference comes from)")


if __name__ == "__main__":
    main()
