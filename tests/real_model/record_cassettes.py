"""Re-record the cassettes (tests/data/cassettes/*.json) from the real small model.

    python tests/real_model/record_cassettes.py [--only react-tools ...]

Prepares the tier if needed (tests/real_model/prepare.py), starts llama-server on loopback, and runs each
scenario of support.real_model_runs.SCENARIOS and PROOF_SCENARIOS through the Python API behind a recording proxy
(a scenario's `first_call` played as the model's first reply, marked `played` in its cassette); each scenario's
exchanges — the requests' shapes and the model's replies as it sent them — become one cassette, replayed in the
main suite by tests/test_cassettes.py. Prints one line per scenario: its status, requests, and what the replies
held (cut at the token limit, no tool call, malformed tool arguments, server errors).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS), str(Path(__file__).resolve().parent)]

from prepare import prepare  # noqa: E402

from support.cassettes import CASSETTES, MAX_TEXT_CHARS, request_shape  # noqa: E402
from support.llama_server import MODEL_NAME, llama_server  # noqa: E402
from support.provider_server import ProviderServer, calls  # noqa: E402
from support.real_model_runs import PROOF_SCENARIOS, SCENARIOS, Scenario, forwarding, run  # noqa: E402
from support.recording_proxy import Exchange, RecordingProxy  # noqa: E402

NOTE = ("Recorded by tests/real_model/record_cassettes.py: SmolLM2-135M-Instruct on llama.cpp's llama-server. "
        "The replies are model output: untrusted data.")


def _bounded(reply: dict) -> dict:
    cut = dict(reply)
    for key in ("content", "error"):
        if isinstance(cut.get(key), str):
            cut[key] = cut[key][:MAX_TEXT_CHARS]
    cut["tool_calls"] = [[name[:200], args[:MAX_TEXT_CHARS]] for name, args in cut.get("tool_calls") or []]
    if "status" in cut:
        cut.pop("tool_calls")
    return cut


def _malformed(arguments: str) -> bool:
    try:
        return not isinstance(json.loads(arguments), dict)
    except ValueError:
        return True


def features(exchanges: list[Exchange]) -> dict[str, int]:
    """What the replies held that a product must cope with."""
    replies = [e.reply for e in exchanges]
    return {"cut at the token limit": sum(r.get("finish_reason") == "length" for r in replies),
            "no tool call where tools were offered": sum(
                not r.get("tool_calls") and e.request.get("tools") is not None and "status" not in r
                for e, r in zip(exchanges, replies, strict=True)),
            "malformed tool arguments": sum(_malformed(a) for r in replies for _, a in r.get("tool_calls") or []),
            "server errors": sum("status" in r for r in replies)}


def _run(scenario: Scenario, proxy: RecordingProxy) -> dict:
    """The scenario's run against the real model; one with a `first_call` gets that call played as its first reply
    by the local test server, which hands every later request to the real model (through the proxy)."""
    if scenario.first_call is None:
        return run(scenario, f"openai:{MODEL_NAME}")
    with ProviderServer(calls(scenario.first_call), then=forwarding(proxy.openai_url.removesuffix("/v1"))) as server:
        os.environ["OPENAI_BASE_URL"] = server.openai_url
        try:
            return run(scenario, f"openai:{MODEL_NAME}")
        finally:
            os.environ["OPENAI_BASE_URL"] = proxy.openai_url


def _played(scenario: Scenario) -> list[dict]:
    """The exchange of a scenario's played first call, as the cassette keeps a recorded one."""
    if scenario.first_call is None:
        return []
    return [{"request": {"kind": "tools", "played": True},
             "reply": {"content": None, "tool_calls": [list(scenario.first_call)], "finish_reason": "tool_calls"}}]


def record(scenario: Scenario, proxy: RecordingProxy) -> str:
    mark = proxy.mark()
    try:
        result = _run(scenario, proxy)
        outcome = {"status": result.get("status"), "usage": result.get("usage"), "coverage": result.get("coverage")}
    except Exception as exc:  # noqa: BLE001 - a crash is recorded and reported, the other scenarios still run
        outcome = {"crash": f"{type(exc).__name__}: {exc}"[:500]}
    exchanges = [e for e in proxy.since(mark) if e.complete]
    cassette = {"note": NOTE, "scenario": scenario.as_json(),
                "recorded": {"model": MODEL_NAME, "requests": len(proxy.since(mark)), "outcome": outcome,
                             "features": features(exchanges)},
                "exchanges": [*_played(scenario),
                              *({"request": request_shape(e.request), "reply": _bounded(e.reply)} for e in exchanges)]}
    path = CASSETTES / f"{scenario.name}.json"
    path.write_text(json.dumps(cassette, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return f"{scenario.name}: {outcome} requests={len(exchanges)} {cassette['recorded']['features']}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=None, help="scenario names (default: all)")
    args = parser.parse_args()
    chosen = [s for s in (*SCENARIOS, *PROOF_SCENARIOS) if args.only is None or s.name in args.only]
    prepare()
    CASSETTES.mkdir(parents=True, exist_ok=True)
    with llama_server() as url, RecordingProxy(url) as proxy:
        os.environ.update(OPENAI_BASE_URL=proxy.openai_url, OPENAI_API_KEY="not-needed")
        for scenario in chosen:
            print(record(scenario, proxy), flush=True)


if __name__ == "__main__":
    main()
