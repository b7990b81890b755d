"""Decoding only what react-graph stores: LangGraph's serializer with an allow-list that refuses, not guesses.

LangGraph's `JsonPlusSerializer` rebuilds objects named inside msgpack (module, name, arguments) by
importing the module and calling the name: in its default mode anything at all, so whoever can write the
Redis can make a reader call `os.system`. Its strict mode (`allowed_msgpack_modules`) builds only listed
types, but hands back the raw arguments for the others, which lets a crafted value slip into the state as
data. `AllowListSerializer` keeps LangGraph's decoding for what is allowed and raises `RefusedPayload` for
everything else before anything is built: every extension in a value is checked first, in a pass that
imports and calls nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde._msgpack import SAFE_MSGPACK_METHODS, SAFE_MSGPACK_TYPES
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from reactgraph.errors import ReactGraphError

# The encodings `JsonPlusSerializer.dumps_typed` writes without a pickle fallback: react-graph never writes
# "json" (LangChain's constructor JSON, revived by importing) nor "pickle".
ENCODINGS = frozenset({"null", "bytes", "bytearray", "msgpack"})
# LangGraph's msgpack extension codes (langgraph.checkpoint.serde.jsonplus): which build an object from
# (module, name, ...), which call a method, and the one that only wraps a value.
_BUILDS = frozenset({0, 1, 2, 4, 5})
_CALLS_METHOD = 3
_NUMPY_ARRAY = 6
_DELTA_SNAPSHOT = 7
_OPTIONS = ormsgpack.OPT_NON_STR_KEYS

TypeName = tuple[str, ...]


class RefusedPayload(ReactGraphError, ValueError):
    """A stored value that is not one react-graph decodes; nothing in it was imported, built or called."""


def type_names(types: Iterable[type | TypeName]) -> frozenset[TypeName]:
    """(module, name) pairs for classes or pairs, the form LangGraph's allow-lists take."""
    names = set()
    for t in types:
        name = (t.__module__, t.__name__) if isinstance(t, type) else tuple(t)
        if len(name) < 2 or not all(isinstance(part, str) for part in name):
            raise TypeError(f"allowed types are classes or (module, name) pairs, not {t!r}")
        names.add(name)
    return frozenset(names)


class AllowListSerializer(JsonPlusSerializer):
    """LangGraph's serializer that decodes only LangGraph's safe types, LangChain's messages and `allowed_types`.

    `allowed_types` extends the list with your own state classes (classes or (module, name) pairs). With
    LANGGRAPH_STRICT_MSGPACK=true, LangGraph adds the types of a compiled graph's state schema itself.
    """

    def __init__(self, allowed_types: Iterable[type | TypeName] = ()) -> None:
        self.allowed_types = type_names(allowed_types)
        self._allowed = SAFE_MSGPACK_TYPES | self.allowed_types
        # LangGraph's strict mode with the same list: what passes the check below is all it may build.
        super().__init__(allowed_msgpack_modules=tuple(self._allowed))

    def with_msgpack_allowlist(self, extra_allowlist: Iterable[type | TypeName]) -> AllowListSerializer:
        """What `BaseCheckpointSaver.with_allowlist` (LangGraph's strict mode at compile time) calls."""
        extra = type_names(extra_allowlist) - self._allowed
        return AllowListSerializer(self.allowed_types | extra) if extra else self

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        encoding, payload = data
        if encoding not in ENCODINGS:
            raise RefusedPayload(f"refused the {encoding[:40]!r} encoding: react-graph reads msgpack only")
        if encoding == "msgpack":
            self.check(payload)
        return super().loads_typed(data)

    def check(self, payload: bytes) -> None:
        """Raise RefusedPayload if the msgpack names any type or method outside the allow-list, or is malformed."""
        refusals: list[str] = []

        def vet(code: int, data: bytes) -> None:
            reason = self._refusal(code, data, vet, refusals)
            if reason:
                refusals.append(reason)
                raise RefusedPayload(reason)

        try:
            ormsgpack.unpackb(payload, ext_hook=vet, option=_OPTIONS)
        except (ValueError, TypeError, RecursionError) as exc:
            # ormsgpack replaces an ext_hook's exception with "ext_hook failed": the innermost reason is kept above.
            raise RefusedPayload(refusals[0] if refusals else f"not valid msgpack ({exc})") from None

    def _refusal(self, code: int, data: bytes, vet: Any, refusals: list[str]) -> str | None:
        if code not in _BUILDS and code not in (_CALLS_METHOD, _NUMPY_ARRAY, _DELTA_SNAPSHOT):
            return f"refused msgpack extension type {code}: not one LangGraph writes"
        try:
            inner = ormsgpack.unpackb(data, ext_hook=vet, option=_OPTIONS)
        except (ValueError, TypeError, RecursionError) as exc:
            return refusals[0] if refusals else f"a malformed msgpack extension ({exc})"  # the innermost reason
        if code == _DELTA_SNAPSHOT:
            return None
        if code == _NUMPY_ARRAY:
            return None if ("numpy", "ndarray") in self._allowed else "refused a numpy array: not an allowed type"
        if not (isinstance(inner, (list, tuple)) and len(inner) >= 3 and all(isinstance(p, str) for p in inner[:2])):
            return "a malformed msgpack extension (no module and name)"
        module, name = inner[0][:100], inner[1][:100]
        if code == _CALLS_METHOD:
            method = inner[3] if len(inner) > 3 and isinstance(inner[3], str) else "?"
            if (module, name, method) not in SAFE_MSGPACK_METHODS:
                return f"refused to call {module}.{name}.{method[:100]}: not an allowed method"
        elif (module, name) not in self._allowed:
            return f"refused to build {module}.{name}: not an allowed type (see AllowListSerializer)"
        return None

