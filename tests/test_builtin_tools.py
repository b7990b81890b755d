"""The built-in tools, called directly: happy paths, refusals, limits and fuzzed arguments."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reactgraph.tools.builtin import builtin_tools
from reactgraph.tools.builtin.calculator import MAX_EXPRESSION_CHARS, calculator_tool
from reactgraph.tools.builtin.clock import get_time_tool
from reactgraph.tools.builtin.http_get import MAX_BODY_BYTES, host_allowed, http_get_tool, is_public_address
from reactgraph.tools.builtin.search import search_tool
from reactgraph.tools.builtin.weather import get_weather_tool
from reactgraph.tools.call import ToolError, ToolInputError, ToolRegistrationError, TransientToolError
from reactgraph.tools.meta import ToolMeta
from support.local_servers import free_port

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FIXED_NOW = datetime(2026, 11, 29, 12, 7, tzinfo=UTC)


def run(meta: ToolMeta, **kwargs: Any) -> Any:
    """Call a tool the way the gateway does: async tools are awaited, sync ones called."""
    if meta.is_async:
        return asyncio.run(meta.run(**kwargs))
    return meta.run(**kwargs)


def assert_json_safe(value: Any) -> None:
    json.dumps(value, ensure_ascii=False, allow_nan=False)


# --- a local HTTP server: the only network these tests ever touch ---------------------------------

WTTR_SAMPLE = {"current_condition": [{
    "temp_C": "7", "humidity": "81", "weatherDesc": [{"value": "Light rain"}],
    "lang_zh": [{"value": "小雨"}], "winddir16Point": "NE", "windspeedKmph": "13"}]}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass

    def _send(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8",
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path == "/hello":
            self._send(200, "hello 世界".encode())
        elif path == "/big":
            self._send(200, "数据".encode() * 1_000_000)  # 6 MB
        elif path == "/missing":
            self._send(404, b"not here")
        elif path == "/boom":
            self._send(503, b"down for maintenance")
        elif path == "/image":
            self._send(200, b"\x89PNG\r\n\x1a\n" + bytes(100), "image/png")
        elif path == "/redirect-in":
            self._send(302, b"", headers={"Location": "/hello"})
        elif path == "/redirect-out":
            self._send(302, b"", headers={"Location": "http://example.org/"})
        elif path == "/redirect-loop":
            self._send(302, b"", headers={"Location": "/redirect-loop"})
        elif path.startswith("/weather/"):
            city = path.removeprefix("/weather/")
            if city == "Atlantis":
                self._send(404, b"Unknown location")
            elif city == "Broken":
                self._send(200, b"<html>not json</html>", "text/html")
            elif city == "Down":
                self._send(502, b"bad gateway")
            else:
                self._send(200, json.dumps(WTTR_SAMPLE).encode(), "application/json")
        else:
            self._send(404, b"no such page")


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that stop reading early (the size cap) reset the connection on purpose


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = _QuietServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def closed_port() -> int:
    return free_port()  # nothing listens there


# --- the package -----------------------------------------------------------------------------------

def test_builtin_tools_are_the_six_tools_in_order_with_schemas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REACTGRAPH_HTTP_ALLOW", raising=False)
    monkeypatch.delenv("REACTGRAPH_WEATHER_URL", raising=False)
    tools = builtin_tools()
    assert [t.name for t in tools] == ["calculator", "get_time", "get_weather", "search", "rag_search", "http_get"]
    for tool in tools:
        function = tool.openai_schema()["function"]
        assert function["description"]
        for name, spec in function["parameters"]["properties"].items():
            assert spec.get("description"), f"{tool.name}.{name} has no description for the model"
    assert {t.name: t.tags for t in tools}["get_weather"] == ("weather",)


def test_env_vars_configure_network_tools(monkeypatch: pytest.MonkeyPatch, server: str) -> None:
    monkeypatch.setenv("REACTGRAPH_HTTP_ALLOW", "127.0.0.1, docs.python.org")
    monkeypatch.setenv("REACTGRAPH_WEATHER_URL", server + "/weather/{city}")
    tools = {t.name: t for t in builtin_tools(http_allow_private=True)}
    assert run(tools["http_get"], url=server + "/hello")["status_code"] == 200
    assert run(tools["get_weather"], city="Paris")["source"] == "127.0.0.1"
    assert "network" in tools["get_weather"].tags
    # Explicit empty settings mean offline even when the variables are set.
    offline = {t.name: t for t in builtin_tools(http_allow_hosts=(), http_allow_private=True, weather_url="")}
    assert run(offline["get_weather"], city="Paris")["source"] == "offline sample data"
    with pytest.raises(ToolInputError, match="allowed: none"):
        run(offline["http_get"], url=server + "/hello")


# --- calculator ------------------------------------------------------------------------------------

calculator = calculator_tool()


@pytest.mark.parametrize(("expression", "expected"), [
    ("(15+27)*3", 126), ("10/4", 2.5), ("8/2", 4), ("2**10", 1024), ("2^10", 1024), ("0.1+0.2", 0.3),
    ("３×４", 12), ("（１＋２）＊３＝？", 9), ("100÷4", 25), ("7 x 6", 42), ("2(3+4)", 14),
    ("1,000*3", 3000), ("12,345,678 / 2", 6172839), ("max(1, 2)", 2), ("15%*200", 30), ("10 % 3", 1),
    ("sqrt(16)", 4), ("log(8, 2)", 3), ("factorial(10)", 3628800), ("abs(-3) + round(2.5)", 5),
    ("hypot(3,4)", 5), ("-(-5)", 5), ("25 * 4 等于多少", 100), ("pi", 3.141592653589793),
    ("sqrt(2)", 1.4142135623730951), ("100/7", 14.285714285714286), ("1.1*3", 3.3), ("1e-20*3", 3e-20),
])
def test_calculator_answers(expression: str, expected: int | float) -> None:
    result = calculator.run(expression=expression)
    assert result["result"] == expected
    assert type(result["result"]) is type(expected)
    assert_json_safe(result)


def test_calculator_returns_the_expression_it_evaluated() -> None:
    assert calculator.run(expression="2×3") == {"expression": "2*3", "result": 6}


@pytest.mark.parametrize(("expression", "reason"), [
    ("__import__('os').system('id')", "not allowed: function call"),
    ("open('/etc/passwd').read()", "not allowed: function call"),
    ("9**9**9", "exponent"),
    ("(1,)*10**9", "not allowed: tuples"),
    ("(" * 10_000 + "1" + ")" * 10_000, "too long"),
    ("(" * 150 + "1" + ")" * 150, "nested too deeply"),
    ("-" * 900 + "1", "too complex"),
    ("x" * 10_000_000, "too long"),
    ("1/0", "division by zero"),
    ("5 // 0", "division by zero"),
    ("10**1000", "digits"),
    ("2**100000", "exponent"),
    ("factorial(100000)", "factorial"),
    ("factorial(500)", "digits"),
    ("1e400", "too large"),
    ("exp(1000)", "too large"),
    ("sqrt(-1)", "sqrt"),
    ("(-8)**(1/3)", "not a real number"),
    ("round(1.5, 10**9)", "round"),
    ("x + 1", "not allowed: name 'x'"),
    ("'a' * 3", "not allowed: strings"),
    ("[1, 2][0]", "not allowed"),
    ("pi.real", "not allowed: attribute"),
    ("(lambda: 1)()", "not allowed"),
    ("[i for i in range(10**9)]", "not allowed"),
    ("1 < 2", "not allowed: comparisons"),
    ("3j", "complex"),
    ("0x10", "hexadecimal"),
    ("", "empty"),
    ("1 +", "cannot parse"),
])
def test_calculator_refuses_quickly_with_a_clear_message(expression: str, reason: str) -> None:
    # CPU time, not wall time: "quickly" is about the work done, which other processes do not stretch.
    started = time.process_time()
    with pytest.raises(ToolInputError, match=reason.replace("(", r"\(")) as caught:
        calculator.run(expression=expression)
    assert time.process_time() - started < 2.0
    assert len(str(caught.value)) < 400


def test_calculator_length_limit_is_checked_before_anything_else() -> None:
    huge = "1+" * 5_000_000 + "1"
    started = time.process_time()
    with pytest.raises(ToolInputError, match="too long"):
        calculator.run(expression=huge)
    assert time.process_time() - started < 0.5
    assert calculator.run(expression="1" * MAX_EXPRESSION_CHARS)["result"] == int("1" * 1000)


_numbers = st.one_of(st.integers(), st.integers(min_value=-(10**400), max_value=10**400),
                     st.floats(allow_nan=True, allow_infinity=True)).map(repr)
_expressions = st.recursive(
    _numbers | st.sampled_from(["pi", "e", "tau", "x", "__import__", "()", "''"]),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "//", "%", "**", "^", "×", "÷", ",", " x "]),
                  inner).map("".join),
        inner.map(lambda e: f"({e})"), inner.map(lambda e: f"-{e}"),
        st.tuples(st.sampled_from(["sqrt", "log", "exp", "factorial", "round", "max", "pow", "sin", "abs",
                                   "eval", "floor"]), st.lists(inner, max_size=3)).map(
            lambda fa: f"{fa[0]}({', '.join(fa[1])})"),
    ),
    max_leaves=12,
)


@FUZZ
@given(st.one_of(st.text(max_size=300), _expressions))
def test_calculator_fuzz_returns_a_result_or_a_tool_error(expression: str) -> None:
    started = time.process_time()
    try:
        result = calculator.run(expression=expression)
    except ToolError:
        pass
    else:
        assert isinstance(result, dict) and isinstance(result["result"], int | float)
        assert_json_safe(result)
    assert time.process_time() - started < 2.0


# --- get_time --------------------------------------------------------------------------------------

time_tool = get_time_tool(now=lambda: FIXED_NOW)


def test_get_time_defaults_to_china_time() -> None:
    assert time_tool.run() == {
        "timezone": "Asia/Shanghai", "iso": "2026-11-29T20:07:00+08:00", "date": "2026-11-29",
        "time": "20:07:00", "weekday": "Sunday", "year": 2026, "utc_offset": "+08:00",
    }


@pytest.mark.parametrize(("place", "zone", "time_of_day"), [
    ("北京", "Asia/Shanghai", "20:07:00"), ("上海市", "Asia/Shanghai", "20:07:00"),
    ("Beijing", "Asia/Shanghai", "20:07:00"), ("东京", "Asia/Tokyo", "21:07:00"),
    ("Tokyo", "Asia/Tokyo", "21:07:00"), ("纽约", "America/New_York", "07:07:00"),
    ("New York", "America/New_York", "07:07:00"), ("伦敦", "Europe/London", "12:07:00"),
    ("悉尼", "Australia/Sydney", "23:07:00"), ("america/los_angeles", "America/Los_Angeles", "04:07:00"),
    ("UTC", "UTC", "12:07:00"), ("UTC+5:30", "UTC+05:30", "17:37:00"), ("北京时间", "Asia/Shanghai", "20:07:00"),
])
def test_get_time_by_city_or_zone(place: str, zone: str, time_of_day: str) -> None:
    result = time_tool.run(timezone=place)
    assert (result["timezone"], result["time"]) == (zone, time_of_day)


def test_get_time_refuses_unknown_places_with_examples() -> None:
    for place in ("Atlantis", "../../etc/passwd", "UTC+99", "x" * 10_000):
        with pytest.raises(ToolInputError, match=r"Asia/Shanghai|offset|too long"):
            time_tool.run(timezone=place)


def test_get_time_uses_the_real_clock_by_default() -> None:
    assert get_time_tool().run(timezone="UTC")["year"] >= 2025


@FUZZ
@given(st.text(max_size=200))
def test_get_time_fuzz(place: str) -> None:
    with contextlib.suppress(ToolError):
        assert_json_safe(time_tool.run(timezone=place))


# --- get_weather -----------------------------------------------------------------------------------

offline_weather = get_weather_tool("")


def test_weather_offline_answers_in_the_language_asked() -> None:
    assert run(offline_weather, city="北京") == {
        "found": True, "city": "北京", "condition": "晴", "temperature_c": 3, "humidity": 35,
        "wind": "北风 3级", "source": "offline sample data"}
    english = run(offline_weather, city="  beijing city ")
    assert (english["city"], english["condition"], english["temperature_c"]) == ("Beijing", "sunny", 3)


@pytest.mark.parametrize("name", ["北京市", "Peking", "BEIJING", "北京天气"])
def test_weather_aliases(name: str) -> None:
    assert run(offline_weather, city=name)["temperature_c"] == 3


def test_weather_sample_temperatures_are_distinct_and_ordered() -> None:
    cities = ["北京", "上海", "广州", "深圳", "香港", "杭州", "南京", "成都", "重庆", "武汉", "西安", "天津",
              "苏州", "哈尔滨", "昆明", "三亚", "台北", "拉萨", "乌鲁木齐", "Tokyo", "New York", "London",
              "Paris", "Singapore", "Sydney"]
    temperatures = {city: run(offline_weather, city=city)["temperature_c"] for city in cities}
    assert len(set(temperatures.values())) == len(cities)
    assert temperatures["北京"] < temperatures["上海"] < temperatures["广州"]
    assert temperatures["哈尔滨"] < temperatures["北京"] < temperatures["深圳"]


def test_weather_unknown_city_is_not_an_error() -> None:
    result = run(offline_weather, city="Atlantis")
    assert result["found"] is False and result["city"] == "Atlantis"
    assert result["message"].startswith("no weather data for Atlantis")
    assert "Beijing" in result["known_cities"]
    assert "北京" in run(offline_weather, city="亚特兰蒂斯")["known_cities"]


def test_weather_refuses_empty_or_huge_city() -> None:
    for city in ("", "   ", "x" * 1000):
        with pytest.raises(ToolInputError):
            run(offline_weather, city=city)


async def test_weather_live_provider(server: str) -> None:
    live = get_weather_tool(server + "/weather/{city}?format=j1")
    assert await live.run(city="上海") == {
        "found": True, "city": "上海", "condition": "小雨", "temperature_c": 7, "humidity": 81,
        "wind": "NE 13 km/h", "source": "127.0.0.1"}
    assert (await live.run(city="Shanghai"))["condition"] == "Light rain"
    missing = await live.run(city="Atlantis")
    assert missing["found"] is False and missing["message"].startswith("no weather data for Atlantis")
    with pytest.raises(TransientToolError):
        await live.run(city="Down")
    with pytest.raises(ToolError, match="unexpected response"):
        await live.run(city="Broken")


def test_weather_url_must_name_the_city() -> None:
    with pytest.raises(ToolRegistrationError, match="placeholder"):
        get_weather_tool("https://wttr.in/Beijing?format=j1")


async def test_weather_live_provider_unreachable_is_transient(closed_port: int) -> None:
    live = get_weather_tool(f"http://127.0.0.1:{closed_port}/{{city}}", timeout_s=2)
    with pytest.raises(TransientToolError, match="unreachable"):
        await live.run(city="北京")


@FUZZ
@given(st.text(max_size=200))
def test_weather_fuzz(city: str) -> None:
    with contextlib.suppress(ToolError):
        assert_json_safe(run(offline_weather, city=city))


# --- search ----------------------------------------------------------------------------------------

search = search_tool()


def top(query: str) -> dict[str, Any]:
    result = search.run(query=query)
    assert result["found"], result
    return result["results"][0]


@pytest.mark.parametrize(("query", "entry"), [
    ("Python是哪一年发布的？", "python"), ("When was Python first released?", "python"),
    ("langchian", "langchain"), ("LangChain 的作者是谁", "langchain"), ("What is LangGraph", "langgraph"),
    ("ReAct 是什么", "react"), ("DeepSeek是哪家公司", "deepseek"), ("英伟达市值多少", "nvidia"),
    ("NVIDIA's market value", "nvidia"), ("SpaceX 星舰", "starship"), ("苹果的CEO是谁", "apple"),
    ("Who is the CEO of Apple?", "apple"), ("Tim Cook 是哪年出生的", "tim_cook"),
    ("库克的生日", "tim_cook"), ("Python的创始人是谁", "guido_van_rossum"), ("pyhton", "python"),
    ("transfomer", "transformer"), ("人类第一次登月是哪一年", "moon_landing"),
    ("Linus Torvalds born", "linux"), ("马斯克出生日期", "elon_musk"), ("比尔盖茨", "microsoft"),
    ("Who created Git?", "linux"), ("什么是RAG", "rag"),
])
def test_search_finds_the_right_entry(query: str, entry: str) -> None:
    assert top(query)["source"] == f"offline knowledge base: {entry}"


def test_search_answers_in_the_language_of_the_query() -> None:
    chinese, english = top("Python 哪一年发布"), top("Python release year")
    assert "1991年" in chinese["snippet"] and chinese["title"] == "Python（编程语言）"
    assert "1991" in english["snippet"] and "Guido van Rossum" in english["snippet"]
    assert "1960年11月1日" in top("蒂姆·库克出生日期")["snippet"]
    assert "November 1, 1960" in top("Tim Cook birthday")["snippet"]
    assert "2011" in top("Who is the CEO of Apple?")["snippet"]
    assert "October 2022" in top("langchain")["snippet"]


def test_search_result_shape() -> None:
    result = search.run(query="Who is the CEO of Apple?", top_k=2)
    assert set(result) == {"query", "found", "results"} and len(result["results"]) == 2
    for item in result["results"]:
        assert set(item) == {"title", "snippet", "source", "score"}
        assert isinstance(item["score"], float) and 0 < item["score"] <= 1
    assert result["results"][0]["score"] >= result["results"][1]["score"]


@pytest.mark.parametrize("query", [
    "What is the capital of France?", "什么是深度学习", "xyz", "how do I cook rice", "Dalai Lama",
    "量子计算机", "Java 是什么", "who won the 2018 world cup", "apply for a visa", "what is",
])
def test_search_says_found_false_rather_than_returning_something_unrelated(query: str) -> None:
    result = search.run(query=query)
    assert result == {"query": query, "found": False, "results": [],
                      "message": result["message"]}
    assert result["message"].startswith(f"no results for '{query}' in the offline knowledge base")


def test_search_refuses_empty_and_huge_queries() -> None:
    for query in ("", "  ", "python " * 1000):
        with pytest.raises(ToolInputError):
            search.run(query=query)


@FUZZ
@given(st.text(max_size=600), st.integers())
def test_search_fuzz(query: str, top_k: int) -> None:
    try:
        result = search.run(query=query, top_k=top_k)
    except ToolError:
        return
    assert_json_safe(result)
    assert len(result["results"]) <= 10


# --- http_get --------------------------------------------------------------------------------------

def local_http(**options: Any) -> ToolMeta:
    return http_get_tool(["127.0.0.1"], allow_private=True, **options)


async def test_http_get_fetches_text(server: str) -> None:
    result = await local_http().run(url=server + "/hello")
    assert result == {"url": server + "/hello", "status_code": 200,
                      "content_type": "text/plain; charset=utf-8", "body": "hello 世界", "truncated": False}


async def test_http_get_4xx_is_a_result_and_5xx_is_transient(server: str) -> None:
    assert (await local_http().run(url=server + "/missing"))["status_code"] == 404
    with pytest.raises(TransientToolError, match="503"):
        await local_http().run(url=server + "/boom")


async def test_http_get_truncates_large_bodies(server: str) -> None:
    started = time.perf_counter()
    small = await local_http(max_bytes=1_000).run(url=server + "/big")
    assert small["truncated"] is True and len(small["body"].encode()) <= 1_000
    assert set(small["body"]) == {"数", "据"}  # the cut never leaves half a character
    default = await local_http().run(url=server + "/big")
    assert default["truncated"] is True and len(default["body"].encode()) <= MAX_BODY_BYTES
    assert time.perf_counter() - started < 30  # a hang guard: the two cut reads are quick even on a loaded machine


async def test_http_get_redirects_are_checked(server: str) -> None:
    followed = await local_http().run(url=server + "/redirect-in")
    assert followed["url"] == server + "/hello" and followed["body"] == "hello 世界"
    with pytest.raises(ToolInputError, match=r"redirect to http://example\.org/ refused: .*allow-list"):
        await local_http().run(url=server + "/redirect-out")
    with pytest.raises(ToolError, match="too many redirects"):
        await local_http().run(url=server + "/redirect-loop")


async def test_http_get_does_not_show_binary_content(server: str) -> None:
    result = await local_http().run(url=server + "/image")
    assert result["body"] == "" and "binary" in result["message"]


async def test_http_get_refuses_loopback_by_default(server: str) -> None:
    guarded = http_get_tool(["127.0.0.1", "localhost", "::1", "169.254.169.254", "10.0.0.1"])
    port = server.rsplit(":", 1)[1]
    for url in (server + "/hello", f"http://localhost:{port}/hello", "http://[::1]/",
                "http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/"):
        with pytest.raises(ToolInputError, match="non-public"):
            await guarded.run(url=url)


async def test_http_get_refuses_hosts_not_on_the_allow_list() -> None:
    tool = http_get_tool(["docs.python.org"])
    with pytest.raises(ToolInputError, match="REACTGRAPH_HTTP_ALLOW") as caught:
        await tool.run(url="https://example.com/")
    assert "docs.python.org" in str(caught.value)
    with pytest.raises(ToolInputError, match="allowed: none"):
        await http_get_tool([]).run(url="https://docs.python.org/")


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/", "file:///etc/passwd", "javascript:alert(1)",
                                 "http://user:pw@127.0.0.1/", "http://", "https://" + "a" * 3000])
async def test_http_get_refuses_bad_urls(url: str) -> None:
    with pytest.raises(ToolInputError):
        await local_http().run(url=url)


async def test_http_get_connection_errors_are_transient(closed_port: int) -> None:
    with pytest.raises(TransientToolError):
        await local_http().run(url=f"http://127.0.0.1:{closed_port}/")


async def test_http_get_connects_to_the_address_it_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second DNS answer (rebinding to 127.0.0.1) cannot be used: the request goes to the checked IP."""
    answers = {"docs.python.org": "151.101.0.223", "intranet.python.org": "10.0.0.5"}

    resolver = socket.getaddrinfo

    def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:  # DNS, at the socket layer
        if host not in answers:
            return resolver(host, port, *args, **kwargs)
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (answers[host], port))]

    sent: list[httpx.Request] = []

    def respond(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, text="ok", headers={"content-type": "text/plain"})

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    tool = http_get_tool(["python.org"], transport=httpx.MockTransport(respond))
    result = await tool.run(url="https://docs.python.org/3/")
    assert result["url"] == "https://docs.python.org/3/" and result["body"] == "ok"
    assert sent[0].url.host == "151.101.0.223" and sent[0].headers["host"] == "docs.python.org"
    assert sent[0].extensions["sni_hostname"] == "docs.python.org"
    with pytest.raises(ToolInputError, match="non-public address"):
        await tool.run(url="https://intranet.python.org/")
    assert len(sent) == 1


def test_allow_list_matches_hosts_and_subdomains_only() -> None:
    allow = ["python.org", "127.0.0.1"]
    assert host_allowed("python.org", allow) and host_allowed("docs.python.org", allow)
    assert not host_allowed("evilpython.org", allow) and not host_allowed("python.org.evil.com", allow)
    assert host_allowed("127.0.0.1", allow) and not host_allowed("x.127.0.0.1", allow)


@pytest.mark.parametrize(("address", "public"), [
    ("8.8.8.8", True), ("2001:4860:4860::8888", True), ("127.0.0.1", False), ("10.1.2.3", False),
    ("192.168.0.1", False), ("172.16.0.1", False), ("169.254.169.254", False), ("100.64.0.1", False),
    ("0.0.0.0", False), ("224.0.0.1", False), ("240.0.0.1", False), ("::1", False), ("::", False),
    ("fe80::1", False), ("fc00::1", False), ("ff02::1", False), ("::ffff:127.0.0.1", False),
    ("64:ff9b::7f00:1", False), ("2002:7f00:1::", False),
])
def test_public_address_check(address: str, public: bool) -> None:
    assert is_public_address(ipaddress.ip_address(address)) is public


@FUZZ
@given(url=st.one_of(st.text(max_size=300), st.text(max_size=100).map(lambda path: "PATH:" + path)))
def test_http_get_fuzz(server: str, url: str) -> None:
    # Only the local server is allow-listed, so a generated URL can reach nothing else.
    url = url.replace("PATH:", server + "/", 1)
    try:
        result = run(local_http(timeout_s=2), url=url)
    except ToolError:
        return
    assert_json_safe(result)
