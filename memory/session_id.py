"""Session ids: the one check every entry point applies, and their reversible encoding as store labels.

A session id is 1 to `MAX_SESSION_ID` printable characters: e-mail addresses, dots, slashes, spaces and any
script are fine. Refused: control characters (C0, C1, DEL), line and paragraph separators, bidirectional
overrides (they reorder what a terminal shows) and lone surrogates (not encodable as UTF-8), an empty or
blank id, and an over-long one.
"""

from __future__ import annotations

import re
import unicodedata

from reactgraph.errors import ReactGraphError

MAX_SESSION_ID = 256  # characters; keys and store labels stay well under Redis's limits

# Categories that break one-line output or cannot be stored: controls, surrogates, line/paragraph separators.
_REFUSED_CATEGORIES = {"Cc", "Cs", "Zl", "Zp"}
# Bidirectional controls ("Trojan source"): an id must read the same in a terminal as it is stored.
_BIDI_CONTROLS = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_RULE = f"a session id is 1-{MAX_SESSION_ID} printable characters"

# LangGraph's store refuses "." in namespace labels; "%" is encoded too so decoding is exact.
_LABEL_ESCAPES = {"%": "%25", ".": "%2E"}
_LABEL_UNESCAPE = re.compile("%(25|2E)")


class InvalidSessionId(ReactGraphError, ValueError):
    """A session id that cannot be used; the message is one line naming the cause."""


def check_session_id(session: object) -> str:
    """The session id itself if usable, else `InvalidSessionId` before anything is read or written."""
    if not isinstance(session, str):
        raise InvalidSessionId(f"invalid session id: expected text, got {type(session).__name__}; {_RULE}")
    if not session.strip():
        raise InvalidSessionId(f"invalid session id {session!r}: it is empty; {_RULE}")
    if len(session) > MAX_SESSION_ID:
        raise InvalidSessionId(f"invalid session id {session[:40]!r}…: it has {len(session)} characters; {_RULE}")
    for position, char in enumerate(session, 1):
        if unicodedata.category(char) in _REFUSED_CATEGORIES or char in _BIDI_CONTROLS:
            # repr escapes exactly the characters refused here, so the line shows where the culprit is
            shown = session if len(session) <= 60 else session[:60] + "…"
            raise InvalidSessionId(f"invalid session id {shown!r}: character {position} is "
                                   f"U+{ord(char):04X} ({_describe(char)}); {_RULE}")
    return session


def _describe(char: str) -> str:
    if char in _BIDI_CONTROLS:
        return "a bidirectional control"
    return {"Cc": "a control character", "Cs": "a lone surrogate"}.get(unicodedata.category(char),
                                                                       "a line or paragraph separator")


def store_label(session: str) -> str:
    """The session as one namespace label of a LangGraph store; plain ids (no "." or "%") are unchanged."""
    if "." not in session and "%" not in session:
        return session
    return "".join(_LABEL_ESCAPES.get(char, char) for char in session)


def session_of_label(label: str) -> str:
    """The session id a store label was made from (the inverse of `store_label`)."""
    if "%" not in label:
        return label
    return _LABEL_UNESCAPE.sub(lambda m: "%" if m.group(1) == "25" else ".", label)
