"""Model specs as chat models; their failures in one line.

A spec is what LangChain's `init_chat_model` takes, plus the project's own: `openai:<model>` and
`anthropic:<model>` (or their bare names, `gpt-4o`, `claude-sonnet-4-6`, the provider inferred as `init_chat_model`
infers it) load with the project's clients, bounds and retries; `offline` and `test` are the scripted models;
any other `<provider>:<model>` (`google_genai:gemini-2.5-flash`, `ollama:llama3.1`, `mistralai:…`) is loaded by
`init_chat_model` from the provider's LangChain package, with the run's retries and timeout where its client
takes them.
"""

from __future__ import annotations

import http
import json
import os
import re
import sys
from typing import Any
from urllib.parse import urlsplit

from langchain_core.language_models import BaseChatModel
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable, RunnableBinding, RunnableConfig, RunnableSequence
from pydantic import SecretStr

from reactgraph.errors import ReactGraphError

SPEC_HELP = ("use 'offline', 'openai:<model>' (e.g. openai:gpt-4o-mini), 'anthropic:<model>', another provider "
             "as LangChain's init_chat_model names it ('<provider>:<model>', e.g. ollama:llama3.1) or 'test' "
             "(calls the tools from their schemas, no key: 'test:<tool>,<tool>' picks them)")
_PROVIDER = re.compile(r"^[a-z][a-z0-9_]{1,39}$")  # init_chat_model's provider names: openai, google_genai, …
# Bare model names whose provider the project loads itself, inferred as init_chat_model infers them.
_INFERRED = (("openai", ("gpt-", "o1", "o3", "o4", "chatgpt")), ("anthropic", ("claude",)))
DEFAULT_RETRIES = 3
# A local model on a CPU (SmolLM2-135M on llama-server, 2 cores: ~55 tokens/s after a short prompt, ~8 after one
# of 4-5k tokens) needs up to ~2 minutes for a reply of the default 1024 tokens (Context.max_output_tokens).
DEFAULT_TIMEOUT_S = 120.0
EMPTY_STREAM = "No generations found in stream"  # langchain-core's error for a stream that closed with no data
SECRET_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
NONSTANDARD_STATUS = {529: "Overloaded"}  # Anthropic's "API temporarily overloaded" (retried like a 5xx)


class ModelConfigError(ReactGraphError, ValueError):
    """The model spec or its environment is unusable; the message is one line a user can act on."""


def parse_spec(spec: str) -> tuple[str, str]:
    """Split a spec into (provider, model name), validating its shape."""
    spec = (spec or "").strip()
    if spec == "offline" or spec.startswith(("offline-noisy:", "offline:noisy=")):  # noisy: offline/model.py
        return "offline", "offline-scripted" if spec == "offline" else spec
    if spec == "test" or spec.startswith("test:"):  # models/schema_test_model.py
        return "test", spec
    provider, sep, name = spec.partition(":")
    if not sep:
        inferred = next((p for p, prefixes in _INFERRED if spec.lower().startswith(prefixes)), None)
        if inferred is None or any(c.isspace() for c in spec):
            raise ModelConfigError(f"unknown model spec {spec!r}: {SPEC_HELP}")
        return inferred, spec
    if not _PROVIDER.match(provider) or not name.strip():
        raise ModelConfigError(f"unknown model spec {spec!r}: {SPEC_HELP}")
    if provider not in ("openai", "anthropic") and (known := _langchain_providers()) and provider not in known:
        raise ModelConfigError(f"unknown model provider {provider!r} in {spec!r}: init_chat_model knows "
                               f"{', '.join(sorted(known))}")
    return provider, name.strip()


def _langchain_providers() -> frozenset[str]:
    """The providers `init_chat_model` knows, so that a misspelt one is refused when the spec is read, not when
    the first run loads it. LangChain keeps the list in a private table: read where it is, else nothing is
    checked here (the load still refuses it, in one line)."""
    try:
        from langchain.chat_models import base
    except ImportError:
        return frozenset()
    return frozenset(getattr(base, "_BUILTIN_PROVIDERS", {}) or ())


def canonical_spec(spec: str) -> str:
    """One spelling per model: `gpt-4o` and `openai:gpt-4o` are the same (allow-lists compare these)."""
    provider, name = parse_spec(spec)
    return spec.strip() if provider in ("offline", "test") else f"{provider}:{name}"


def env_number(variable: str, default: float, kind: type) -> Any:
    """A non-negative number from the environment (`default` when unset); anything else is a ModelConfigError."""
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return kind(default)
    try:
        value = kind(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ModelConfigError(f"{variable} must be a non-negative {kind.__name__}, not {raw!r}")
    return value


def load_chat_model(spec: str, temperature: float = 0.0, *, retries: int | None = None,
                    timeout: float | None = None) -> BaseChatModel:
    """The chat model for a spec, configured from the environment (keys, base URLs, retries) at call time."""
    provider, name = parse_spec(spec)
    if provider == "offline":
        from reactgraph.models.offline.model import offline_model
        return offline_model(spec)
    if provider == "test":
        from reactgraph.models.schema_test_model import test_model
        return test_model(spec)
    # The provider SDKs retry 408/409/429/5xx, timeouts and refused connections with exponential backoff
    # (honouring Retry-After); `retries` bounds that, `timeout` bounds each attempt.
    retries = env_number("REACTGRAPH_MODEL_RETRIES", DEFAULT_RETRIES, int) if retries is None else retries
    timeout = env_number("REACTGRAPH_MODEL_TIMEOUT", DEFAULT_TIMEOUT_S, float) if timeout is None else timeout
    if provider == "openai":
        return _openai(name, temperature, retries, timeout)
    if provider == "anthropic":
        return _anthropic(name, temperature, retries, timeout)
    return _other_provider(provider, name, temperature, retries, timeout)


def _other_provider(provider: str, name: str, temperature: float, retries: int, timeout: float) -> BaseChatModel:
    """A provider the project has no client of its own for, through LangChain's `init_chat_model`; the run's
    retries and timeout go to its client where it has those fields (the names LangChain's clients use)."""
    from langchain.chat_models import init_chat_model

    try:
        model = init_chat_model(name, model_provider=provider, temperature=temperature)
    except ImportError as exc:
        raise ModelConfigError(f"{provider}:{name} needs its LangChain package: {str(exc).splitlines()[0]}") from None
    except ValueError as exc:  # an unsupported provider, or a model the package refuses
        raise ModelConfigError(f"{provider}:{name}: {str(exc).splitlines()[0]}") from None
    fields = type(model).model_fields
    settings = {key: value for key, value in (("max_retries", retries), ("timeout", timeout),
                                              ("request_timeout", timeout)) if key in fields}
    return model.model_copy(update=settings) if settings else model


def _credentials(env_prefix: str, provider: str) -> tuple[str, str | None]:
    """The API key and base URL from <PREFIX>_API_KEY / <PREFIX>_BASE_URL; a key is only optional with a base URL."""
    base_url = os.environ.get(f"{env_prefix}_BASE_URL") or None
    api_key = os.environ.get(f"{env_prefix}_API_KEY")
    if not api_key:
        if not base_url:
            raise ModelConfigError(f"{env_prefix}_API_KEY is not set (or set {env_prefix}_BASE_URL for a local "
                                   f"{provider}-compatible server)")
        api_key = "not-needed"  # local compatible servers (vLLM, Ollama, proxies) accept any key
    return api_key, base_url


def _openai(name: str, temperature: float, retries: int, timeout: float) -> BaseChatModel:
    try:
        from reactgraph.models.openai_compat import CompatibleChatOpenAI, provider_clients, tool_choice_setting
        from reactgraph.models.structured_output import strategies
    except ImportError as exc:
        raise ModelConfigError("openai models need langchain-openai: pip install 'react-graph[openai]'") from exc
    tool_choice, _ = tool_choice_setting(), strategies()  # a bad setting is one line now, not an error mid-run
    api_key, base_url = _credentials("OPENAI", "OpenAI")
    # langchain-openai asks for usage in the stream (`stream_options.include_usage`) only when no base URL is
    # set; without it a streamed run counts ~0 tokens. Compatible servers (vLLM, Ollama, LiteLLM) send the
    # usage chunk too; REACTGRAPH_STREAM_USAGE=0 turns the request off for one that rejects the option.
    stream_usage = os.environ.get("REACTGRAPH_STREAM_USAGE", "1").strip().lower() not in ("0", "false", "no", "off")
    return CompatibleChatOpenAI(model=name, temperature=temperature, base_url=base_url, api_key=SecretStr(api_key),
                                max_retries=retries, timeout=timeout, stream_usage=stream_usage,
                                default_tool_choice=tool_choice, **provider_clients())


def _anthropic(name: str, temperature: float, retries: int, timeout: float) -> BaseChatModel:
    try:
        import langchain_anthropic  # noqa: F401 - the extra itself, asked first: the next module may be loaded already

        from reactgraph.models.bounded_anthropic import BoundedChatAnthropic
    except ImportError as exc:
        raise ModelConfigError("anthropic models need langchain-anthropic: pip install langchain-anthropic") from exc
    api_key, base_url = _credentials("ANTHROPIC", "Anthropic")
    options: dict[str, Any] = {"model": name, "temperature": temperature, "api_key": SecretStr(api_key),
                               "max_retries": retries, "timeout": timeout}
    if base_url:  # unset: ChatAnthropic's own default (or ANTHROPIC_API_URL)
        options["base_url"] = base_url
    return BoundedChatAnthropic(**options)


def without_tool_use(model: BaseChatModel, tools: list[dict[str, Any]]) -> Any:
    """The model for a reply that must not call tools, over a conversation that may hold tool calls.

    Anthropic's Messages API rejects a request whose messages contain tool_use/tool_result blocks but that
    defines no tools, so for it the tools stay defined and tool_choice "none" forbids calling them. Every
    other model (OpenAI, the offline model, injected test models) gets no tools bound, as before.
    """
    anthropic = sys.modules.get("langchain_anthropic")  # loaded if the model is one of its chat models
    if tools and anthropic is not None and isinstance(model, anthropic.ChatAnthropic):
        return model.bind_tools(tools, tool_choice={"type": "none"})
    return model


def structured_runnable(model: Any, schema: type | dict[str, Any], *, plain_json: bool = False) -> Runnable:
    """`model`'s structured output as `schema`, raw reply included. `plain_json`: a model that speaks the text
    protocol may offer no tool calling or JSON schema, so an OpenAI-compatible one is asked for JSON in the text."""
    compat = sys.modules.get("reactgraph.models.openai_compat")  # loaded if the model is one of its chat models
    if plain_json and compat is not None and isinstance(model, compat.CompatibleChatOpenAI):
        from reactgraph.models.structured_output import plain_json as json_in_text
        return json_in_text(model, schema)
    lean = with_raw_reply(model.with_structured_output(schema))
    return lean if lean is not None else model.with_structured_output(schema, include_raw=True)


class RawAndParsed(Runnable[Any, dict[str, Any]]):
    """What `with_structured_output(include_raw=True)` answers — `{"raw", "parsed", "parsing_error"}` — made from
    the `model | parser` that `include_raw=False` gives: the model's reply, then the parser's reading of it, or the
    parser's exception as `parsing_error` (the model's own failure is raised, as there). LangChain builds the
    `include_raw` form as a map and a fallback around the same two steps, each map running its one step on a thread
    pool of its own: ≈ 3 ms of CPU a call more, on the offline model's 0.5 ms (benchmarks/structured_calls.py)."""

    def __init__(self, model: Runnable, parser: Runnable) -> None:
        self.model, self.parser = model, parser

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> dict[str, Any]:
        raw = self.model.invoke(input, config, **kwargs)
        try:
            return {"raw": raw, "parsed": self.parser.invoke(raw, config), "parsing_error": None}
        except Exception as exc:  # noqa: BLE001 - reported, as LangChain's include_raw reports it
            return {"raw": raw, "parsed": None, "parsing_error": exc}

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> dict[str, Any]:
        raw = await self.model.ainvoke(input, config, **kwargs)
        try:
            return {"raw": raw, "parsed": await self.parser.ainvoke(raw, config), "parsing_error": None}
        except Exception as exc:  # noqa: BLE001 - reported, as LangChain's include_raw reports it
            return {"raw": raw, "parsed": None, "parsing_error": exc}


def with_raw_reply(parsed_only: Runnable) -> RawAndParsed | None:
    """`RawAndParsed` for a structured output of the shape LangChain's chat models give (the model, bound to the
    schema, then its parser); None for any other shape, which the caller asks for with `include_raw=True`."""
    steps = getattr(parsed_only, "steps", None)
    if not isinstance(parsed_only, RunnableSequence) or not steps or len(steps) < 2:
        return None
    model = steps[0].bound if isinstance(steps[0], RunnableBinding) else steps[0]
    if not isinstance(model, BaseChatModel):
        return None
    return RawAndParsed(_traced_schema_once(steps[0]), steps[1] if len(steps) == 2 else RunnableSequence(*steps[1:]))


def _traced_schema_once(bound: Runnable) -> Runnable:
    """The bound model with its `ls_structured_output_format` schema already JSON schema. A chat model turns that
    schema into JSON schema on every call, for its tracers' metadata: pydantic's schema generation, 0.3-0.8 ms a call
    for the graphs' schemas, more than the offline model's whole reply. Done once here; the metadata is the same."""
    traced = bound.kwargs.get("ls_structured_output_format") if isinstance(bound, RunnableBinding) else None
    if not isinstance(traced, dict) or isinstance(traced.get("schema"), dict):
        return bound
    from langchain_core.utils.function_calling import convert_to_json_schema

    try:
        schema = convert_to_json_schema(traced["schema"])
    except ValueError:  # a schema LangChain leaves out of the metadata (it catches the same error)
        return bound
    return bound.bind(ls_structured_output_format={**traced, "schema": schema})


# --- failures --------------------------------------------------------------------------------------------

def _endpoint(exc: BaseException, model: Any) -> str:
    """Where the call went, without credentials or query strings (some providers take keys in the URL)."""
    url = (getattr(model, "openai_api_base", None) or getattr(model, "anthropic_api_url", None)
           or str(getattr(getattr(exc, "request", None), "url", "") or ""))
    if not url:
        return "the provider"
    parts = urlsplit(str(url))
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}".rstrip("/") if parts.scheme else "the provider"


def _provider_message(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error")
        inner = error if isinstance(error, dict) else body
        message = inner.get("message")
        if isinstance(message, str):
            return message
    return ""


def _root_cause(exc: BaseException) -> str:
    """The innermost reason ("Connection refused"), not the SDK wrappers' generic "Connection error."."""
    reason, seen = str(exc).strip(), 0
    cause = exc.__cause__ or exc.__context__
    while cause is not None and seen < 10:
        reason = re.sub(r"^\[Errno -?\d+\]\s*", "", str(cause).strip()) or reason
        cause, seen = cause.__cause__ or cause.__context__, seen + 1
    return reason


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _is_provider_error(exc: BaseException, status: int | None) -> bool:
    """An error of a provider SDK (an HTTP status, or a request that got no response), not of our code."""
    if status is not None:
        return True
    try:
        return getattr(exc, "request", None) is not None
    except RuntimeError:  # httpx's RequestError.request raises when no request was attached
        return False


# The last alternative is llama.cpp's server failing to read a constrained reply back ("The model produced output
# that does not match the expected peg-native format"): the same request, seeded, fails the same way again.
_BAD_REQUEST = re.compile(
    r"invalid|validat|bad request|not supported|unsupported|must be|is required|missing (field|param)|"
    r"unknown (field|param|argument)|unrecognized|not allowed|not permitted|extra (fields|inputs)|"
    r"exceeds? (the )?(context|maximum|max|available)|"
    r"too (long|large|many)|context (length|size|window)|malformed|failed to parse|parse error|"
    r"does not match the expected \S+ format", re.IGNORECASE)


def says_request_is_bad(body: Any) -> bool:
    """Whether an error body (the JSON error object, or its text) says the request itself is bad: some servers
    answer a request they cannot validate with a 500, which the same request would get again."""
    if isinstance(body, dict):
        error = body.get("error", body)
        body = json.dumps(error) if isinstance(error, dict) else str(error)
    text = str(body or "")
    return "invalid_request" in text or bool(_BAD_REQUEST.search(text))


def _is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, TimeoutError) or "timeout" in type(exc).__name__.lower()


def _is_empty_stream(exc: BaseException) -> bool:
    return isinstance(exc, ValueError) and EMPTY_STREAM in str(exc)


def is_transient_model_error(exc: BaseException) -> bool:
    """Worth another attempt later: 408/409/429, 5xx (Anthropic's 529) unless its body says the request is bad,
    a timeout, a connection that failed, or a stream that closed with no data.

    A bad key (401) or a bad request (400, or a 500 that says so) is final.
    """
    status = _status(exc)
    if status is not None:
        # Only a plain 500 can be a validation error in disguise; 502/503/504/529 say the server is unavailable.
        return status in (408, 409, 429) or (status >= 500 and not (status == 500 and says_request_is_bad(
            getattr(exc, "body", None) or str(exc))))
    if _is_empty_stream(exc):
        return True
    return _is_provider_error(exc, None) or isinstance(exc, (TimeoutError, ConnectionError))


def node_retries_for(exc: BaseException, temperature: float) -> int | None:
    """At most this many re-runs of a node for `exc` (None: as many as the retry policy allows). A stream that
    closed empty is worth one more try; so is a timeout at temperature 0, where the same request would most
    likely take as long again."""
    if _is_empty_stream(exc) or (temperature == 0 and _is_timeout(exc)):
        return 1
    return None


def secrets() -> list[str]:
    """API key values present in the environment, to be kept out of anything shown or stored."""
    return [v for v in (os.environ.get(name, "") for name in SECRET_VARIABLES) if len(v) >= 4]


def redact(text: str, model: Any = None) -> str:
    """The text with every known API key value replaced by ***."""
    values = secrets()
    for field in ("openai_api_key", "anthropic_api_key"):
        secret = getattr(model, field, None)
        if secret is not None and hasattr(secret, "get_secret_value") and len(secret.get_secret_value()) >= 4:
            values.append(secret.get_secret_value())
    for value in values:
        text = text.replace(value, "***")
    return text


def describe_model_error(exc: BaseException, model: Any = None) -> str:
    """One line saying why a model call failed (status, endpoint, retries used), with no secrets in it."""
    status = _status(exc)
    if not _is_provider_error(exc, status):
        line = f"The model call failed: {type(exc).__name__}: {str(exc).strip()[:300]}"
        return redact(" ".join(line.split()), model)
    where = _endpoint(exc, model)
    if status is not None:
        try:
            phrase = http.HTTPStatus(status).phrase
        except ValueError:
            phrase = NONSTANDARD_STATUS.get(status, "error")
        line = f"model provider error: {status} {phrase} from {where}"
        detail = _provider_message(exc)
        if detail and detail.lower() != phrase.lower():
            line += f": {detail[:160]}"
    elif "timeout" in type(exc).__name__.lower():
        timeout = getattr(model, "request_timeout", None) or getattr(model, "default_request_timeout", None)
        line = f"model provider error: no reply from {where}" + (f" within {timeout:g}s" if
                                                                 isinstance(timeout, (int, float)) else "")
    else:
        reason = _root_cause(exc)
        line = f"model provider error: cannot connect to {where}" + (f" ({reason[:120]})" if reason else "")
    retries = getattr(model, "max_retries", None)
    if _is_timeout(exc) and getattr(model, "timeouts_final", False):
        retries = 0  # on the bounded transports its SDK does not retry a timeout (models/bounded_transport.py)
    if isinstance(retries, int) and retries and is_transient_model_error(exc):
        line += f" (after {retries} {'retry' if retries == 1 else 'retries'})"
    return redact(" ".join(line.split()), model)


# A model that could not be loaded (its spec or environment is unusable), standing in as a model whose every call
# fails with that one line. Used where fallbacks are configured (Context.fallback_models): a model that cannot be
# loaded then fails like one that cannot be reached, and the next fallback, or the node's own handling of a failed
# call, takes over.
class UnloadableModel(BaseChatModel):
    """Every call raises `error` (the loader's ModelConfigError)."""

    model_name: str  # the spec it was loaded from
    error: Exception

    @property
    def _llm_type(self) -> str:
        return "unloadable"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        raise self.error
