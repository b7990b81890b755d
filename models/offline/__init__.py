"""The scripted offline chat model: deterministic rules over the built-in tools, clearly not an LLM.

Its reach is frozen: weather, time, arithmetic, facts, who / when / how-long chains, URLs, document lookups and
recall of what the user said are the kinds of question it handles, and no new kind is added (a real model is
the answer to those). Within that reach it is honest like any model: a clause it maps to no part is reported
missing. Its word lists live in data/*.json (read once by words.py) and may grow.
"""

from .model import MODEL_NAME, OfflineChatModel
from .structured import RESPONDERS

__all__ = ["MODEL_NAME", "RESPONDERS", "OfflineChatModel"]
