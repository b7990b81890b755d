"""Named checkers for answers that depend on the day or on what the tools returned.

Each checker takes the answer, the run's ExecutionStep records and the task's `params`, and returns a bool.
`trajectory` (evals/trajectory.py) judges the run's tool calls with LangChain's agentevals.
"Today" is the date the `get_time` tool reported during the run when it was called (so the answer is judged
against the same clock the agent saw), otherwise the current date in the task's timezone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from reactgraph.evals.tasks import normalise, numbers_in
from reactgraph.evals.trajectory import trajectory
from reactgraph.evals.trajectory import validate as validate_trajectory

Checker = Callable[..., bool]
DEFAULT_TZ = "Asia/Shanghai"
_WEEKDAYS = {
    0: ("monday", "星期一", "周一", "礼拜一"), 1: ("tuesday", "星期二", "周二", "礼拜二"),
    2: ("wednesday", "星期三", "周三", "礼拜三"), 3: ("thursday", "星期四", "周四", "礼拜四"),
    4: ("friday", "星期五", "周五", "礼拜五"), 5: ("saturday", "星期六", "周六", "礼拜六"),
    6: ("sunday", "星期日", "星期天", "周日", "礼拜天", "礼拜日"),
}
_DECLINES = ("无法", "不能", "没能", "没有", "抱歉", "不知道", "不存在", "cannot", "can't", "could not",
             "couldn't", "unable", "no data", "not available", "don't know", "do not know", "no weather data",
             "not found", "no results", "does not exist")
_CLOCK = re.compile(r"(\d{1,2})\s*(?::|：|点|时)\s*(\d{1,2})")


def _tool_dates(steps: list[dict[str, Any]]) -> list[date]:
    found = []
    for step in steps:
        if step.get("action") != "get_time" or step.get("status") != "ok":
            continue
        try:
            found.append(date.fromisoformat(json.loads(step["observation"])["date"]))
        except (ValueError, KeyError, TypeError):
            continue
    return found


def today(steps: list[dict[str, Any]], tz: str = DEFAULT_TZ) -> date:
    """The date the agent's clock tool reported, else today's date in `tz`."""
    dates = _tool_dates(steps)
    return dates[-1] if dates else datetime.now(ZoneInfo(tz)).date()


def clock(answer: str, steps: list[dict[str, Any]], tz: str = DEFAULT_TZ, slack_min: int = 5) -> bool:
    """The answer states the current time in `tz` (HH:MM, or 21点24分) within `slack_min` minutes."""
    now = datetime.now(ZoneInfo(tz))
    for hour, minute in _CLOCK.findall(answer or ""):
        h, m = int(hour), int(minute)
        if h > 23 or m > 59:
            continue
        for day_shift in (-1, 0, 1):  # near midnight the stated time may belong to the other day
            stated = now.replace(hour=h, minute=m, second=0, microsecond=0) + timedelta(days=day_shift)
            if abs((stated - now).total_seconds()) <= slack_min * 60 + 59:
                return True
    return False


def weekday(answer: str, steps: list[dict[str, Any]], tz: str = DEFAULT_TZ) -> bool:
    """The answer names today's weekday in `tz` (in English or Chinese)."""
    text = normalise(answer)
    return any(name in text for name in _WEEKDAYS[today(steps, tz).weekday()])


def age(answer: str, steps: list[dict[str, Any]], names: list[str], born: str, tz: str = DEFAULT_TZ) -> bool:
    """The answer names the person (any of `names`) and a plausible age for someone born on `born`.

    Plausible: the exact age today, or the difference of the years (what counting by year gives before the
    birthday); the date comes from the agent's clock tool when it used one.
    """
    text = normalise(answer)
    if not any(normalise(n) in text for n in names):
        return False
    birth, now = date.fromisoformat(born), today(steps, tz)
    exact = now.year - birth.year - ((now.month, now.day) < (birth.month, birth.day))
    return any(n in (exact, now.year - birth.year) for n in numbers_in(answer))


def years_since(answer: str, steps: list[dict[str, Any]], year: int, tz: str = DEFAULT_TZ) -> bool:
    """The answer gives the years elapsed since `year` (this year minus it, or one less)."""
    current = today(steps, tz).year
    return any(n in (current - year, current - year - 1) for n in numbers_in(answer))


def declines(answer: str, steps: list[dict[str, Any]]) -> bool:
    """The answer says honestly that it cannot answer or found no data, instead of inventing one."""
    text = normalise(answer)
    return any(marker in text for marker in _DECLINES)


CHECKERS: dict[str, Checker] = {
    "clock": clock, "weekday": weekday, "age": age, "years_since": years_since, "declines": declines,
    "trajectory": trajectory,  # the run's tool calls, judged by agentevals (evals/trajectory.py)
}
# Checks of a checker's params when the suite loads (ValueError, one line), so a bad task fails before any run.
PARAM_CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {"trajectory": validate_trajectory}
