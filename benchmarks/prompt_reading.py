"""What reading a turn's history costs each model request: each message read once and kept (as shipped) against read
again at every request (as before 2026-12-06), side by side.

Every request of a turn sends its whole history again. The think node frames each tool result as data
(nodes/prompts.py `for_model`) and the model gateway estimates the prompt's tokens when the model reports none
(models/token_estimate.py `usage_for`); both now keep what they derive from a message while it lives
(`PerMessage`). Here one request's share of that work — the history framed, the prompt estimated — is timed on
conversations of 5, 20 and 50 tool rounds, in interleaved rounds; "read again" empties what is kept before each
request, so it also pays for keeping (a little slower than the code before the change).

    python benchmarks/prompt_reading.py [--rounds 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from reactgraph.models import token_estimate
from reactgraph.models.token_estimate import usage_for
from reactgraph.nodes import prompts
from reactgraph.nodes.prompts import SYSTEM_PROMPT, for_model


def conversation(tool_rounds: int) -> list[BaseMessage]:
    """A question and `tool_rounds` rounds of a weather lookup and its result (≈ 150 characters of JSON)."""
    messages: list[BaseMessage] = [HumanMessage("北京、上海和广州的天气分别怎么样？哪个城市最热？")]
    for n in range(tool_rounds):
        call = {"name": "get_weather", "args": {"city": f"城市{n}"}, "id": f"c{n}", "type": "tool_call"}
        result = {"found": True, "city": f"城市{n}", "condition": "晴", "temperature_c": 20 + n % 10, "humidity": 40,
                  "wind": "NE 10 km/h", "source": "sample"}
        messages += [AIMessage(f"Looking up city {n}.", tool_calls=[call]),
                     ToolMessage(json.dumps(result, ensure_ascii=False), tool_call_id=f"c{n}", name="get_weather")]
    return messages


def request(history: list[BaseMessage], reply: AIMessage) -> None:
    """One request's reading of the history: the system prompt, the history framed, the prompt's estimate."""
    prompt = [SystemMessage(SYSTEM_PROMPT.format(now=prompts.prompt_date())), *for_model(history)]
    usage_for(prompt, reply)


def forget() -> None:
    token_estimate._message_counts._kept.clear()
    token_estimate._repeated_counts.cache_clear()
    prompts._framed_copy._kept.clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    reply = AIMessage("北京晴，上海多云，广州最热。")
    print(f"One request's reading of the history ({args.rounds} interleaved rounds, medians, CPU):")
    for tool_rounds in (5, 20, 50):
        history = conversation(tool_rounds)
        kept: list[float] = []
        again: list[float] = []
        for n in range(-10, args.rounds):  # ten rounds to warm up
            for side in (("kept", "again") if n % 2 else ("again", "kept")):
                if side == "again":
                    forget()
                started = time.process_time()
                request(history, reply)
                elapsed = time.process_time() - started
                if n >= 0:
                    (kept if side == "kept" else again).append(elapsed)
        k, a = statistics.median(kept) * 1e6, statistics.median(again) * 1e6
        print(f"  {len(history):3d} messages ({tool_rounds:2d} tool rounds): read again {a:7.1f} µs, "
              f"kept {k:6.1f} µs: {a / k:.2f}x")


if __name__ == "__main__":
    main()
