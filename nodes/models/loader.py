"""Model specs (`offline`, `openai:<model>`, `anthropic:<model>`) turned into chat models."""

from __future__ import annotations

import os

from langchain_core.language_models import BaseChatModel

SPEC_HELP = "use 'offline', 'openai:<model>' (e.g. openai:gpt-4o-mini) or 'anthropic:<model>'"


class ModelConfigError(ValueError):
    """The model spec or its environment is unusable; the message is one line a user can act on."""


def parse_spec(spec: str) -> tuple[str, str]:
    """Split a spec into (provider, model name), validating its shape."""
    spec = (spec or "").strip()
    if spec == "offline":
        return "offline", "offline-scripted"
    provider, sep, name = spec.partition(":")
    if not sep or provider not in ("openai", "anthropic") or not name.strip():
        raise ModelConfigError(f"unknown model spec {spec!r}: {SPEC_HELP}")
    return provider, name.strip()


def load_chat_model(spec: str, temperature: float = 0.0) -> BaseChatModel:
    """The chat model for a spec, configured from the environment (keys, base URLs) at call time."""
    provider, name = parse_spec(spec)
    if provider == "offline":
        from nodes.models.offline import OfflineChatModel
        return OfflineChatModel()
    if provider == "openai":
        return _openai(name, temperature)
    return _anthropic(name, temperature)


def _openai(name: str, temperature: float) -> BaseChatModel:
    try:
        from langchain_openai import ChatOpenAI
    except ImportError as exc:
        raise ModelConfigError("openai models need langchain-openai: pip install 'react-graph[openai]'") from exc
    base_url = os.environ.get("OPENAI_BASE_URL") or None
    api_key = os.environ.get("OPENAI_API_KEY")
    if not api_key:
        if not base_url:
            raise ModelConfigError("OPENAI_API_KEY is not set (or set OPENAI_BASE_URL for a local "
                                   "OpenAI-compatible server)")
        api_key = "not-needed"  # local OpenAI-compatible servers (vLLM, Ollama) accept any key
    return ChatOpenAI(model=name, temperature=temperature, base_url=base_url, api_key=api_key,
                      max_retries=3, timeout=60)


def _anthropic(name: str, temperature: float) -> BaseChatModel:
    try:
        from langchain_anthropic import ChatAnthropic
    except ImportError as exc:
        raise ModelConfigError("anthropic models need langchain-anthropic: pip install langchain-anthropic") from exc
    if not os.environ.get("ANTHROPIC_API_KEY"):
        raise ModelConfigError("ANTHROPIC_API_KEY is not set")
    kwargs = {"base_url": os.environ["ANTHROPIC_BASE_URL"]} if os.environ.get("ANTHROPIC_BASE_URL") else {}
    return ChatAnthropic(model=name, temperature=temperature, max_retries=3, timeout=60, **kwargs)
