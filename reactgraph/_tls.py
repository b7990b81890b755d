"""One TLS context for every HTTP client the project makes, built on first use.

An httpx client built with the default `verify=True` builds its own SSL context and loads the whole CA bundle
into it: ≈ 20 ms of CPU for each client, which is most of what making a client costs. We make clients often —
two per model we load (a provider SDK's sync and async client), one per `http_get` call and per live weather
query — so each of those paid it again. One context serves any number of clients and connections, from any
thread (httpx's own advice for many clients). It is built as the package would build it for `verify=True`
(certifi's bundle, or `SSL_CERT_FILE` / `SSL_CERT_DIR` when set), read once, when the first client is made.

This module is plumbing beneath every layer (like `errors`) and imports nothing of the project.
"""

from __future__ import annotations

import functools
import ssl
from types import ModuleType


@functools.cache
def shared_ssl_context(http: ModuleType) -> ssl.SSLContext:
    """The context `http` (httpx, or Anthropic's fork httpx2: the same API) builds for `verify=True`."""
    context: ssl.SSLContext = http.create_ssl_context()
    return context
