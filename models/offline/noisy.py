"""The noisy offline model: the scripted model, except that with a seeded probability a reply's tool call goes
wrong — a tool that does not exist, the wrong built-in tool, or malformed arguments — so a graph's recovery
from model mistakes is measured rather than assumed.

Spec strings: `offline-noisy:<p>` or `offline:noisy=<p>` (p in [0, 1]), optionally `…@<seed>`.
Whether a reply is perturbed is drawn from `Random(f"{seed}|{question}|{round}")`: same seed, same question,
same point in the turn → same mistake, independent of timing or of other runs.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from reactgraph.models.loader import ModelConfigError

from .conversation import read_turn
from .model import OfflineChatModel

NOISY_MODEL_NAME = "offline-noisy"
# Names a model might plausibly invent for each built-in tool.
HALLUCINATED = {"calculator": "python_eval", "get_time": "current_time", "get_weather": "weather_api",
                "search": "web_search", "http_get": "browse"}
# The wrong (but real) tool a confused model might reach for.
WRONG_TOOL = {"calculator": "search", "get_time": "get_weather", "get_weather": "search", "search": "calculator",
              "http_get": "search"}
MISTAKES = ("unknown_tool", "wrong_tool", "bad_args")
_SPEC = re.compile(r"^offline(?:-noisy:|:noisy=)(?P<p>[^@]+)(?:@(?P<seed>.+))?$")


def parse_noisy_spec(spec: str) -> tuple[float, str] | None:
    """(noise, seed) of a noisy spec; None for any other spec. A bad probability is a ModelConfigError."""
    match = _SPEC.match((spec or "").strip())
    if not match:
        return None
    try:
        noise = float(match.group("p"))
    except ValueError:
        noise = -1.0
    if not 0.0 <= noise <= 1.0:
        raise ModelConfigError(f"noisy offline model: the probability in {spec!r} must be a number from 0 to 1")
    return noise, (match.group("seed") or "0")


def perturb(call: dict[str, Any], rng: random.Random) -> tuple[str, dict[str, Any]]:
    """One tool call gone wrong: (kind of mistake, the call as the model now makes it)."""
    name, args = call["name"], dict(call.get("args") or {})
    kind = rng.choice(MISTAKES)
    if kind == "unknown_tool":
        return kind, {**call, "name": HALLUCINATED.get(name, f"{name}_v2")}
    if kind == "wrong_tool":
        return kind, {**call, "name": WRONG_TOOL.get(name, "search")}
    if args and rng.random() < 0.5:  # a misspelt parameter name
        key = min(args)
        args[f"{key}_name" if not key.endswith("_name") else "value"] = args.pop(key)
    else:  # the arguments left out altogether
        args = {}
    return kind, {**call, "args": args}


class NoisyOfflineChatModel(OfflineChatModel):
    """Scripted offline model with seeded tool-call mistakes (NOT an LLM; for robustness measurements)."""

    model_name: str = NOISY_MODEL_NAME
    noise: float = 0.2
    seed: str = "0"

    @property
    def _llm_type(self) -> str:
        return NOISY_MODEL_NAME

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name, "noise": self.noise, "seed": self.seed}

    def reseeded(self, seed: Any) -> NoisyOfflineChatModel:
        """The same model with another seed (e.g. one per eval run)."""
        return self.model_copy(update={"seed": str(seed)})

    def _rng(self, messages: list[BaseMessage]) -> random.Random:
        turn = read_turn(messages)
        return random.Random(f"{self.seed}|{turn.question}|{turn.rounds}|{len(turn.history)}")

    def _tool_step(self, messages: list[BaseMessage], tools: set[str] | None) -> AIMessage:
        reply = super()._tool_step(messages, tools)
        if not reply.tool_calls:
            return reply
        rng = self._rng(messages)
        if rng.random() >= self.noise:
            return reply
        calls: list[dict[str, Any]] = [dict(call) for call in reply.tool_calls]
        index = rng.randrange(len(calls))
        _, calls[index] = perturb(calls[index], rng)
        return AIMessage(content=reply.content, tool_calls=calls)

    def _text_step(self, messages: list[BaseMessage], tools: set[str]) -> AIMessage:
        reply = super()._text_step(messages, tools)
        text = reply.content if isinstance(reply.content, str) else ""
        action = re.search(r"^Action: *(?P<name>\S+)\nAction Input: *(?P<input>.*)$", text, re.MULTILINE)
        if not action:
            return reply
        rng = self._rng(messages)
        if rng.random() >= self.noise:
            return reply
        try:
            args = json.loads(action.group("input"))
        except ValueError:
            args = {}
        _, call = perturb({"name": action.group("name"), "args": args if isinstance(args, dict) else {}}, rng)
        rendered = f"Action: {call['name']}\nAction Input: {json.dumps(call['args'], ensure_ascii=False)}"
        return AIMessage(content=text[:action.start()] + rendered + text[action.end():])


def offline_model(spec: str = "offline") -> OfflineChatModel:
    """The scripted model for `offline`, or its noisy variant for `offline-noisy:<p>` / `offline:noisy=<p>`."""
    parsed = parse_noisy_spec(spec)
    if parsed is None:
        return OfflineChatModel()
    noise, seed = parsed
    return NoisyOfflineChatModel(noise=noise, seed=seed)
