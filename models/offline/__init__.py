"""The scripted offline chat model: deterministic rules over the built-in tools, clearly not an LLM."""

from .model import MODEL_NAME, OfflineChatModel
from .structured import RESPONDERS

__all__ = ["MODEL_NAME", "RESPONDERS", "OfflineChatModel"]
