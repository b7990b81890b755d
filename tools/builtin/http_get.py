"""`http_get`: fetch a page from an allow-listed public host, within size, time and redirect limits."""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import os
import socket
import urllib.parse
import urllib.request
from collections.abc import Iterable
from typing import Any

import httpx

from reactgraph._tls import shared_ssl_context
from reactgraph.tools.call import ToolError, ToolInputError, ToolRegistrationError, TransientToolError
from reactgraph.tools.meta import ToolMeta
from reactgraph.tools.telemetry import trace_headers

ALLOW_ENV = "REACTGRAPH_HTTP_ALLOW"
MAX_QUERY_ENV, MAX_PATH_ENV = "REACTGRAPH_HTTP_MAX_QUERY", "REACTGRAPH_HTTP_MAX_PATH"
# Characters of data (decoded) a URL the model wrote may carry to a host: a search query or an API's few
# parameters fit; a paragraph of the conversation does not (a page may ask the model to send one out).
MAX_QUERY_CHARS = 200
MAX_PATH_CHARS = 300
# The body handed to the model: about 25k tokens of text; reading stops here, however big the page.
MAX_BODY_BYTES = 100_000
MAX_URL_CHARS = 2_000
MAX_REDIRECTS = 5
REQUEST_TIMEOUT_S = 10.0
_REDIRECTS = {301, 302, 303, 307, 308}
_TEXT_TYPES = ("text/", "json", "xml", "javascript", "yaml", "csv", "markdown")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def allow_list_from_env() -> tuple[str, ...]:
    """Hosts named in REACTGRAPH_HTTP_ALLOW (comma-separated, e.g. "example.com,docs.python.org")."""
    return tuple(part for part in os.environ.get(ALLOW_ENV, "").split(",") if part.strip())


def _limit(value: int | None, env: str, default: int) -> int | None:
    """A data limit: the value given, else the environment's, else the default; negative or "off" means none."""
    if value is None:
        raw = os.environ.get(env, "").strip().lower()
        if raw in ("off", "none", "unlimited"):
            return None
        try:
            value = int(raw) if raw else default
        except ValueError:  # a registration error: the CLI reports it in one line
            raise ToolRegistrationError(f"{env} must be a whole number of characters or 'off', not {raw!r}") from None
    return None if value < 0 else value


def _normalise_host(entry: str) -> str:
    entry = entry.strip().lower()
    if "://" in entry:
        entry = httpx.URL(entry).host
    return entry.removeprefix("*.").lstrip(".").rstrip(".")


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def host_allowed(host: str, allow_hosts: Iterable[str]) -> bool:
    """True if `host` is an allow-listed host or a subdomain of one (IP addresses match exactly)."""
    host = host.lower().rstrip(".")
    return any(host == allowed or (host.endswith("." + allowed) and not _is_ip(allowed))
               for allowed in allow_hosts)


def is_public_address(ip: IPAddress) -> bool:
    """False for loopback, private, link-local, multicast, reserved and unspecified addresses."""
    if isinstance(ip, ipaddress.IPv6Address):
        # IPv6 forms that carry an IPv4 address are judged by the address they carry.
        if ip in _NAT64:
            ip = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        else:
            ip = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None) or ip
    return ip.is_global and not (ip.is_loopback or ip.is_private or ip.is_link_local or ip.is_multicast
                                 or ip.is_reserved or ip.is_unspecified)


async def _resolve(host: str, port: int) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        error = TransientToolError if exc.errno == socket.EAI_AGAIN else ToolError
        raise error(f"cannot resolve host {host!r}: {exc.strerror}") from exc
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


def _env_proxy_applies(url: httpx.URL) -> bool:
    proxies = urllib.request.getproxies_environment()
    # typeshed omits proxy_bypass_environment (undocumented, in CPython since 2.7); proxy_bypass would also
    # consult macOS/Windows system settings, which httpx does not
    bypass = urllib.request.proxy_bypass_environment(url.host)  # type: ignore[attr-defined]
    return bool(proxies.get(url.scheme) or proxies.get("all")) and not bypass


async def read_capped(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """Read at most `limit` bytes of a streamed body; also say whether the body went on beyond it."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], True
    return b"".join(chunks), False


def _decode(body: bytes, response: httpx.Response, truncated: bool) -> str:
    try:
        text = body.decode(response.charset_encoding or "utf-8", errors="replace")
    except LookupError:
        text = body.decode("utf-8", errors="replace")
    # A cut in the middle of a multi-byte character leaves a replacement character at the end.
    return text.rstrip("\ufffd") if truncated else text


class _Fetcher:
    """Checks each URL (including every redirect target) against the policy before connecting to it."""

    def __init__(self, allow_hosts: tuple[str, ...], allow_private: bool, max_bytes: int,
                 timeout_s: float, transport: httpx.AsyncBaseTransport | None,
                 data_limits: tuple[int | None, int | None] = (MAX_QUERY_CHARS, MAX_PATH_CHARS)) -> None:
        self.allow_hosts, self.allow_private = allow_hosts, allow_private
        self.max_bytes, self.timeout_s, self.transport = max_bytes, timeout_s, transport
        self.max_query, self.max_path = data_limits

    def check_data(self, url: httpx.URL) -> None:
        """Refuse a URL whose query or path carries more data than allowed (the fragment is never sent)."""
        query = urllib.parse.unquote(url.query.decode("ascii", errors="replace"))
        for part, size, limit, env in (("query string", len(query), self.max_query, MAX_QUERY_ENV),
                                       ("path", len(url.path), self.max_path, MAX_PATH_ENV)):
            if limit is not None and size > limit:
                raise ToolInputError(
                    f"refused: the URL's {part} carries {size} characters (limit {limit}); http_get does not "
                    f"send that much data to a host (a page may be asking for the conversation to be sent out). "
                    f"Fetch the page without it; an operator can raise the limit with {env}")

    def parse(self, url: str) -> httpx.URL:
        url = url.strip()
        if len(url) > MAX_URL_CHARS:
            raise ToolInputError(f"URL is too long (limit {MAX_URL_CHARS} characters)")
        if url and "://" not in url:
            url = "https://" + url
        try:
            parsed = httpx.URL(url)
        except (httpx.InvalidURL, ValueError, TypeError) as exc:
            raise ToolInputError(f"not a valid URL: {url[:100]!r} ({exc})") from exc
        if parsed.scheme not in ("http", "https"):
            raise ToolInputError(f"only http:// and https:// URLs can be fetched (got {url[:100]!r})")
        if not parsed.host:
            raise ToolInputError(f"URL has no host: {url[:100]!r}")
        if parsed.userinfo:
            raise ToolInputError("URLs with a user name or password are not allowed")
        return parsed

    async def admit(self, url: httpx.URL) -> IPAddress:
        """Refuse hosts outside the allow-list or resolving to non-public addresses; return the IP to use."""
        if not host_allowed(url.host, self.allow_hosts):
            listed = ", ".join(self.allow_hosts) or "none"
            raise ToolInputError(
                f"host {url.host!r} is not on the http_get allow-list (allowed: {listed}); "
                f"an operator can add hosts with {ALLOW_ENV}=example.com,docs.python.org")
        addresses = await _resolve(url.host, url.port or (443 if url.scheme == "https" else 80))
        blocked = [str(ip) for ip in addresses if not is_public_address(ip)]
        if blocked and not self.allow_private:
            raise ToolInputError(f"host {url.host!r} resolves to a non-public address ({blocked[0]}); "
                                 "loopback, private, link-local and reserved networks are never fetched")
        if not addresses:
            raise ToolError(f"host {url.host!r} has no addresses")
        return addresses[0]

    async def fetch(self, url: str) -> dict[str, Any]:
        target = self.parse(url)
        # Only the URL the model wrote is checked for data: a redirect's URL is the host's own.
        self.check_data(target)
        # Admit the first hop before building a client: refusals are the common case and must be cheap.
        ip = await self.admit(target)
        async with httpx.AsyncClient(transport=self.transport, timeout=self.timeout_s, follow_redirects=False,
                                     verify=shared_ssl_context(httpx)) as client:
            for hop in range(MAX_REDIRECTS + 1):
                if hop:
                    try:
                        ip = await self.admit(target)
                    except ToolInputError as exc:
                        raise ToolInputError(f"redirect to {str(target)[:100]} refused: {exc}") from exc
                response = await client.send(self._request(client, target, ip), stream=True)
                try:
                    location = response.headers.get("location")
                    if response.status_code in _REDIRECTS and location:
                        target = self.parse(str(target.join(location)))
                        continue
                    return await self._result(target, response)
                finally:
                    await response.aclose()
        raise ToolError(f"too many redirects (more than {MAX_REDIRECTS}) from {url[:100]}")

    def _request(self, client: httpx.AsyncClient, url: httpx.URL, ip: IPAddress) -> httpx.Request:
        # Every URL that gets here was admitted (allow-listed): it may see our trace context (W3C traceparent).
        headers = {"Accept-Encoding": "identity", "User-Agent": "react-graph http_get/0.1", **trace_headers()}
        if self.transport is None and _env_proxy_applies(url):
            # The proxy resolves the name itself; pinning the IP would break its TLS name check.
            return client.build_request("GET", url, headers=headers)
        # Connect to the address we checked (not a second DNS answer), keeping the Host and TLS names.
        return client.build_request(
            "GET", url.copy_with(host=str(ip)), headers={**headers, "Host": url.netloc.decode("ascii")},
            extensions={"sni_hostname": url.raw_host.decode("ascii")} if url.scheme == "https" else {})

    async def _result(self, url: httpx.URL, response: httpx.Response) -> dict[str, Any]:
        if response.status_code >= 500:
            raise TransientToolError(f"HTTP {response.status_code} from {url.host}")
        content_type = response.headers.get("content-type", "")
        result: dict[str, Any] = {"url": str(url), "status_code": response.status_code,
                                  "content_type": content_type}
        if content_type and not any(kind in content_type.lower() for kind in _TEXT_TYPES):
            return {**result, "body": "", "truncated": False,
                    "message": f"binary content ({content_type}) is not shown"}
        body, truncated = await read_capped(response, self.max_bytes)
        return {**result, "body": _decode(body, response, truncated), "truncated": truncated}


APPROVAL_ENV = "REACTGRAPH_HTTP_APPROVAL"


def _approval(value: str | None) -> Any:
    """http_get asks a person before each fetch unless configured otherwise: it is the one built-in tool that
    sends data (its URL) out of the machine."""
    setting = (os.environ.get(APPROVAL_ENV, "") if value is None else value).strip().lower() or "always"
    if setting not in ("always", "never"):
        raise ToolRegistrationError(f"{APPROVAL_ENV if value is None else 'approval'} = {setting!r}: "
                                    "expected 'always' or 'never'")
    return setting


def http_get_tool(allow_hosts: Iterable[str] | None = None, *, allow_private: bool = False,
                  max_bytes: int = MAX_BODY_BYTES, timeout_s: float = REQUEST_TIMEOUT_S,
                  transport: httpx.AsyncBaseTransport | None = None, max_query_chars: int | None = None,
                  max_path_chars: int | None = None, approval: str | None = None) -> ToolMeta:
    """The `http_get` tool. `allow_hosts=None` reads REACTGRAPH_HTTP_ALLOW; empty means nothing is fetched.

    `allow_private=True` permits loopback and private addresses (tests, intranet deployments).
    `max_query_chars` / `max_path_chars`: the most (decoded) characters the URL's query string / path may
    carry; None reads REACTGRAPH_HTTP_MAX_QUERY / REACTGRAPH_HTTP_MAX_PATH (default 200 / 300); a negative
    value (or "off" in the environment) lifts the limit.
    `approval`: "always" (a person approves each call; the default) or "never"; None reads
    REACTGRAPH_HTTP_APPROVAL.
    """
    hosts = allow_list_from_env() if allow_hosts is None else tuple(allow_hosts)
    limits = (_limit(max_query_chars, MAX_QUERY_ENV, MAX_QUERY_CHARS),
              _limit(max_path_chars, MAX_PATH_ENV, MAX_PATH_CHARS))
    fetcher = _Fetcher(tuple(_normalise_host(h) for h in hosts if h.strip()), allow_private,
                       max_bytes, timeout_s, transport, limits)

    async def http_get(url: str) -> dict[str, Any]:
        """Fetch a web page or API response over HTTP(S) and return its status and text.

        Only hosts on the operator's allow-list can be fetched; other hosts are refused. The body is
        the beginning of the response text ("truncated" says whether it was cut). Error pages (404...)
        are returned with their status code. Works for Chinese and English pages alike.

        Args:
            url: The full address to fetch, e.g. "https://docs.python.org/3/". Must be http or https.
        """
        try:
            async with asyncio.timeout(fetcher.timeout_s * 2):
                return await fetcher.fetch(url)
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise TransientToolError(f"timed out fetching {url[:100]}") from exc
        except httpx.TransportError as exc:
            raise TransientToolError(f"network error fetching {url[:100]}: {exc!r}") from exc
        except httpx.HTTPError as exc:
            raise ToolError(f"cannot fetch {url[:100]}: {exc!r}") from exc

    meta = ToolMeta.from_function(http_get, timeout_s=timeout_s * 2 + 5, tags=("network",),
                                  max_concurrency=4, max_attempts=2, approval=_approval(approval))
    # The model should know up front what it may fetch, rather than learn it from refusals.
    allowed = (f" Allowed hosts (and their subdomains): {', '.join(fetcher.allow_hosts)}."
               if fetcher.allow_hosts else " No hosts are allowed in this deployment: every URL is refused.")
    return dataclasses.replace(meta, description=meta.description + allowed)
