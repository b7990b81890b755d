"""`get_time`: the current date and time in a timezone named by IANA key, UTC offset or city."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, available_timezones

from reactgraph.tools.call import ToolInputError
from reactgraph.tools.meta import ToolMeta

# The product's primary users are in China, so a question without a place means China time.
DEFAULT_TIMEZONE = "Asia/Shanghai"

_CITY_ZONES: dict[str, tuple[str, ...]] = {
    "Asia/Shanghai": ("北京", "上海", "广州", "深圳", "杭州", "成都", "中国", "beijing", "peking",
                      "shanghai", "guangzhou", "shenzhen", "hangzhou", "chengdu", "china"),
    "Asia/Hong_Kong": ("香港", "hong kong", "hongkong"),
    "Asia/Taipei": ("台北", "taipei"),
    "Asia/Tokyo": ("东京", "tokyo", "日本", "japan"),
    "Asia/Seoul": ("首尔", "seoul", "韩国", "korea"),
    "Asia/Singapore": ("新加坡", "singapore"),
    "Asia/Bangkok": ("曼谷", "bangkok"),
    "Asia/Kolkata": ("新德里", "孟买", "new delhi", "delhi", "mumbai", "india", "印度"),
    "Asia/Dubai": ("迪拜", "dubai"),
    "Europe/Moscow": ("莫斯科", "moscow"),
    "Europe/Berlin": ("柏林", "berlin", "德国", "germany"),
    "Europe/Paris": ("巴黎", "paris", "法国", "france"),
    "Europe/London": ("伦敦", "london", "英国", "uk"),
    "Europe/Rome": ("罗马", "rome"),
    "Europe/Madrid": ("马德里", "madrid"),
    "America/New_York": ("纽约", "new york", "nyc", "华盛顿", "washington"),
    "America/Chicago": ("芝加哥", "chicago"),
    "America/Los_Angeles": ("洛杉矶", "旧金山", "硅谷", "los angeles", "san francisco", "la",
                            "silicon valley", "seattle", "西雅图"),
    "America/Toronto": ("多伦多", "toronto"),
    "America/Sao_Paulo": ("圣保罗", "sao paulo", "são paulo"),
    "America/Mexico_City": ("墨西哥城", "mexico city"),
    "Australia/Sydney": ("悉尼", "sydney"),
    "Australia/Melbourne": ("墨尔本", "melbourne"),
    "Pacific/Auckland": ("奥克兰", "auckland", "新西兰", "new zealand"),
    "Africa/Cairo": ("开罗", "cairo"),
    "UTC": ("utc", "gmt", "z", "zulu", "协调世界时", "格林尼治", "格林威治"),
}
CITY_TIMEZONES: dict[str, str] = {alias: zone for zone, aliases in _CITY_ZONES.items() for alias in aliases}
_EXAMPLES = "Asia/Shanghai, UTC, UTC+8, 北京, 纽约, London, Tokyo"
_OFFSET = re.compile(r"(?:utc|gmt)?\s*([+-])\s*(\d{1,2})(?::?(\d{2}))?")
_SUFFIXES = ("市", " city", "时间", " time")
# Fixed English names: strftime("%A") would follow the server's locale.
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


@lru_cache(maxsize=1)
def _iana_keys() -> dict[str, str]:
    # Matching against the known keys means no caller-controlled string ever reaches the filesystem.
    return {key.lower(): key for key in available_timezones()}


def _offset_zone(match: re.Match[str]) -> tuple[str, timezone]:
    sign, hours, minutes = match.group(1), int(match.group(2)), int(match.group(3) or 0)
    if hours > 14 or minutes >= 60:
        raise ToolInputError(f"UTC offset out of range (±14:00): {match.group(0)!r}")
    delta = timedelta(hours=hours, minutes=minutes) * (-1 if sign == "-" else 1)
    label = f"UTC{sign}{hours:02d}:{minutes:02d}"
    return label, timezone(delta, label)


def resolve_timezone(place: str) -> tuple[str, ZoneInfo | timezone]:
    """Map an IANA key, "UTC+8"-style offset or city name (Chinese or English) to a timezone."""
    text = " ".join(unicodedata.normalize("NFKC", place).split()).lower()
    if not text:
        return DEFAULT_TIMEZONE, ZoneInfo(DEFAULT_TIMEZONE)
    if len(text) > 100:
        raise ToolInputError(f"timezone name is too long; try one of: {_EXAMPLES}")
    for suffix in _SUFFIXES:
        if text.endswith(suffix) and len(text) > len(suffix):
            text = text[: -len(suffix)].strip()
    key = CITY_TIMEZONES.get(text) or CITY_TIMEZONES.get(text.replace("_", " ")) or _iana_keys().get(text)
    if key:
        return key, ZoneInfo(key)
    if match := _OFFSET.fullmatch(text):
        return _offset_zone(match)
    raise ToolInputError(f"unknown timezone or city {place[:60]!r}; try an IANA name or a city, "
                         f"e.g. {_EXAMPLES}")


def _utc_now() -> datetime:
    return datetime.now(UTC)


def get_time_tool(now: Callable[[], datetime] | None = None) -> ToolMeta:
    """The `get_time` tool; `now` replaces the system clock (tests pass a fixed instant)."""
    clock = now or _utc_now

    def get_time(timezone: str = "") -> dict[str, Any]:
        """Get the current date, time and weekday; use it for any question about today, now or the date.

        Without a timezone it answers in China time (Asia/Shanghai), because most users are in China.

        Args:
            timezone: Where to tell the time: an IANA name ("Asia/Shanghai", "America/New_York"),
                "UTC" or an offset like "UTC+8", or a city/country in Chinese or English
                ("北京", "纽约", "伦敦", "Tokyo", "Paris"). Leave empty for China time.
        """
        name, zone = resolve_timezone(timezone)
        instant = clock()
        if instant.tzinfo is None:
            instant = instant.replace(tzinfo=UTC)
        local = instant.astimezone(zone).replace(microsecond=0)
        offset = local.isoformat()[19:] or "+00:00"
        return {
            "timezone": name,
            "iso": local.isoformat(),
            "date": local.date().isoformat(),
            "time": local.strftime("%H:%M:%S"),
            "weekday": _WEEKDAYS[local.weekday()],
            "year": local.year,
            "utc_offset": offset,
        }

    return ToolMeta.from_function(get_time, timeout_s=2.0, tags=("time",), max_attempts=1)

