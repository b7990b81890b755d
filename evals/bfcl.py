"""BFCL's Python function-calling tasks as eval tasks (`bfcl:<category>` suites), scored as BFCL's AST checker
scores them.

    tasks = load_bfcl("bfcl:simple", limit=3)             # also "bfcl:simple,parallel" and "bfcl:all"
    records = run_comparison(tasks, RunConfig(graphs=("react",)))

**The data** is read straight out of the `bfcl-eval` wheel (a zip), never installed: its own dependencies are heavy
and pinned (numpy==1.26.4, sentence-transformers and with it torch, …) and the evals need only its JSON files. The
wheel is `$REACTGRAPH_BFCL_WHEEL` (or `wheel=`: the file or a directory holding it), else the per-user cache
(`$XDG_CACHE_HOME/reactgraph/bfcl`), filled on first use by one `pip download --no-deps bfcl-eval==BFCL_VERSION`
(said on stderr; ~2 MB). The data is Apache-2.0; `notice()` names it, its version and licence from the wheel's
METADATA, for every report that uses it (NOTICE.md).

**The tools** are schema-only: the model sees each function's doc and may call it; the gateway validates and
records the call, nothing runs, and every call gets the same fixed "recorded" observation. BFCL writes types such
as "dict", "float", "tuple", "any"; `json_schema()` turns them into valid JSON schema (a valid one passes as is),
so the gateway enforces the types the model was shown. Dotted names are offered with underscores (providers
reject dots), as BFCL does for OpenAI-style names.

**The score** is our own, smaller implementation of BFCL's AST checker for its Python categories; the answer text
is not judged. The possible answers give one entry per expected call, `{function: {parameter: [allowed values]}}`
(`""` among them: the parameter may be left out). The run's calls match when there are exactly as many calls as
entries and each entry matches a different call in any order (each takes the first call that matches it); a call
names the entry's function; every required parameter is there and none is unknown to the doc or absent from the
entry; every value has the doc's type (an int is accepted for a float, a bool is not an int; list items one level
deep), or the allowed values' own type where that differs (BFCL's "variable" case, then compared as is); every
value is among the allowed ones (strings after standardising: lower case, without spaces and `,./-_*^`, single
quotes as double; lists element by element, dicts key by key with a missing key allowing "", lists of dicts in
order, other values by equality); and every parameter the call leaves out allows "".

**The report** shows the tool-call accuracy per graph and per `bfcl:<category>` tag, and the data's notice.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from email.parser import HeaderParser
from email.utils import getaddresses
from functools import cache
from pathlib import Path
from typing import Any

from reactgraph.evals.tasks import SuiteError, Task
from reactgraph.tools import ToolGateway, ToolMeta

PREFIX = "bfcl:"
MAX_QUESTION_CHARS = 20_000  # BFCL's longest question is a few hundred characters


def is_bfcl(suite: str) -> bool:
    return str(suite).startswith(PREFIX)


def categories(suite: str) -> list[str]:
    """`bfcl:simple,parallel` → ["simple", "parallel"]; `bfcl:all` → every category."""
    names = [n.strip() for n in str(suite).removeprefix(PREFIX).split(",") if n.strip()]
    if names == ["all"]:
        return list(CATEGORIES)
    unknown = [n for n in names if n not in CATEGORIES]
    if unknown or not names:
        raise SuiteError(f"unknown BFCL category {', '.join(unknown) or '(none)'}: use bfcl:<category> with one or "
                         f"more of {', '.join(CATEGORIES)} (comma-separated), or bfcl:all")
    return list(dict.fromkeys(names))


@cache
def _wheel(path: Path) -> BfclWheel:
    return BfclWheel(path)


def _question(entry: dict[str, Any]) -> str:
    turns = entry.get("question")
    first = turns[0] if isinstance(turns, list) and turns and isinstance(turns[0], list) else []
    text = "\n".join(str(m.get("content") or "") for m in first if isinstance(m, dict) and m.get("role") == "user")
    if not text.strip():
        raise SuiteError(f"BFCL task {entry['id']} has no user question")
    return text.strip()[:MAX_QUESTION_CHARS]


def to_task(category: str, entry: dict[str, Any], answer: dict[str, Any], notice: str) -> Task:
    functions, expected = entry.get("function"), answer.get("ground_truth")
    if not isinstance(functions, list) or not isinstance(expected, list) or not expected:
        raise SuiteError(f"BFCL task {entry['id']}: no function docs or no possible answer")
    return Task(id=entry["id"], question=_question(entry), tags=(f"{PREFIX}{category}",), lang="en",
                tools=tuple(functions), expected_calls=tuple(expected), source=notice)


def load_bfcl(suite: str, limit: int | None = None, wheel: str | Path | None = None) -> list[Task]:
    """The tasks of `bfcl:<category>[,<category>…]`, at most `limit` per category, in BFCL's order."""
    names = categories(suite)
    data = _wheel(find_wheel(wheel))
    notice = data.notice()
    tasks = []
    for name in names:
        pairs = data.category(name)
        tasks += [to_task(name, entry, answer, notice) for entry, answer in pairs[:limit or None]]
    return tasks


BFCL_VERSION = "2026.3.23"  # the data a run is compared on; pinned so that two machines score the same tasks
WHEEL_ENV = "REACTGRAPH_BFCL_WHEEL"
# Our category names → BFCL v4's file stems (in v4 "simple" is split by language; we use Python's).
CATEGORIES = {"simple": "simple_python", "multiple": "multiple", "parallel": "parallel",
              "parallel_multiple": "parallel_multiple"}
MAX_MEMBER_BYTES = 20_000_000  # the largest of these files is ~1 MB; a bigger one is not the wheel we know


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "reactgraph" / "bfcl"


def _wheel_in(folder: Path) -> Path | None:
    wheels = sorted(folder.glob("bfcl_eval-*.whl"))
    return wheels[-1] if wheels else None


def download_wheel(into: Path, say: Callable[[str], None]) -> Path:
    """One `pip download --no-deps` of the pinned wheel into `into` (no dependency is resolved or installed).

    Into a scratch folder first, then moved: two runs downloading at once never see half a wheel."""
    into.mkdir(parents=True, exist_ok=True)
    say(f"BFCL data: downloading the bfcl-eval {BFCL_VERSION} wheel (no dependencies, ~2 MB) into {into}; "
        f"set {WHEEL_ENV} to use a wheel you already have")
    with tempfile.TemporaryDirectory(dir=into) as scratch:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                   "-d", scratch, f"bfcl-eval=={BFCL_VERSION}"]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SuiteError(f"cannot download the bfcl-eval wheel ({exc}); set {WHEEL_ENV} to one") from None
        found = _wheel_in(Path(scratch))
        if done.returncode != 0 or found is None:
            last = (done.stderr.strip().splitlines() or ["no wheel was written"])[-1][:300]
            raise SuiteError(f"pip download bfcl-eval=={BFCL_VERSION} failed: {last}; download it yourself "
                             f"(pip download --no-deps bfcl-eval=={BFCL_VERSION} -d DIR) and set {WHEEL_ENV}=DIR")
        target = into / found.name
        os.replace(found, target)
        return target


def _stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def find_wheel(wheel: str | Path | None = None, say: Callable[[str], None] = _stderr) -> Path:
    """The bfcl-eval wheel: the one given, `$REACTGRAPH_BFCL_WHEEL`, the cached one, or a fresh download."""
    given = str(wheel or os.environ.get(WHEEL_ENV) or "")
    if given:
        path = Path(given).expanduser()
        found = _wheel_in(path) if path.is_dir() else path if path.is_file() else None
        if found is None:
            raise SuiteError(f"{WHEEL_ENV}={given}: no bfcl_eval-*.whl there (download one with "
                             f"pip download --no-deps --only-binary=:all: bfcl-eval=={BFCL_VERSION} -d DIR)")
        return found
    return _wheel_in(cache_dir()) or download_wheel(cache_dir(), say)


class BfclWheel:
    """The data files of one bfcl-eval wheel, opened as a zip."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            with zipfile.ZipFile(path) as archive:
                self._names = set(archive.namelist())
        except (OSError, zipfile.BadZipFile) as exc:
            raise SuiteError(f"{path} is not a readable wheel: {exc}") from None

    def _read(self, member: str) -> str:
        if member not in self._names:
            raise SuiteError(f"{self.path.name} has no {member} (is it a bfcl-eval v4 wheel?)")
        with zipfile.ZipFile(self.path) as archive:
            if archive.getinfo(member).file_size > MAX_MEMBER_BYTES:
                raise SuiteError(f"{self.path.name}: {member} is larger than {MAX_MEMBER_BYTES} bytes")
            return archive.read(member).decode("utf-8")

    def _jsonl(self, member: str) -> list[dict[str, Any]]:
        rows = []
        for number, line in enumerate(self._read(member).splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise SuiteError(f"{self.path.name}: {member}, line {number}: {exc}") from None
            if not isinstance(row, dict) or not isinstance(row.get("id"), str):
                raise SuiteError(f"{self.path.name}: {member}, line {number}: not an object with an id")
            rows.append(row)
        return rows

    def category(self, name: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(entry, possible answer) pairs of one category, in the file's order, joined by id."""
        stem = f"BFCL_v4_{CATEGORIES[name]}.json"
        entries = self._jsonl(f"bfcl_eval/data/{stem}")
        answers = {row["id"]: row for row in self._jsonl(f"bfcl_eval/data/possible_answer/{stem}")}
        missing = [e["id"] for e in entries if e["id"] not in answers]
        if missing:
            raise SuiteError(f"{self.path.name}: no possible answer for {', '.join(missing[:3])}")
        return [(entry, answers[entry["id"]]) for entry in entries]

    def metadata(self) -> dict[str, str]:
        member = next((n for n in self._names if n.endswith(".dist-info/METADATA")), None)
        if member is None:
            raise SuiteError(f"{self.path.name} has no dist-info METADATA")
        headers = HeaderParser().parsestr(self._read(member).split("\n\n", 1)[0])
        urls = headers.get_all("Project-URL") or []
        return {"name": headers.get("Name", "bfcl_eval"), "version": headers.get("Version", "?"),
                "license": headers.get("License", "?"),
                "authors": ", ".join(name or address
                                     for name, address in getaddresses(headers.get_all("Author-email") or [])),
                "url": urls[0].split(",", 1)[-1].strip() if urls else ""}

    def notice(self) -> str:
        """One line crediting the data: what it is, from which wheel, under which licence."""
        meta = self.metadata()
        return (f"BFCL data: Berkeley Function Calling Leaderboard, from the {meta['name']} {meta['version']} wheel "
                f"(licence: {meta['license']}; {meta['authors']}; {meta['url']}); see NOTICE.md")


RECORDED = json.dumps({"status": "recorded", "note": "schema-only tool: the call was recorded, not executed; "
                                                     "there is no other result"})
# BFCL's type names → JSON schema's; "any" has no JSON schema type (no "type" key accepts every value).
_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}
_KEPT = ("description", "enum", "default")  # other keys (BFCL's "optional", "format", "maximum") are not enforced


def json_schema(spec: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema for one BFCL parameter spec (recursively: properties of dicts, items of arrays)."""
    schema: dict[str, Any] = {k: spec[k] for k in _KEPT if k in spec}
    kind = spec.get("type")
    kind = _TYPES.get(kind, kind) if isinstance(kind, str) else None
    if kind:
        schema["type"] = kind
    if isinstance(spec.get("properties"), dict):
        schema["properties"] = {name: json_schema(sub) if isinstance(sub, dict) else {}
                                for name, sub in spec["properties"].items()}
        required = spec.get("required")
        if isinstance(required, list) and all(isinstance(r, str) for r in required):
            schema["required"] = list(dict.fromkeys(required))
    if isinstance(spec.get("items"), dict):
        schema["items"] = json_schema(spec["items"])
    return schema


async def _record(**arguments: Any) -> str:
    return RECORDED


def recorded_tool(doc: dict[str, Any]) -> ToolMeta:
    """One function doc as a schema-only tool (ToolRegistrationError, one line, for a doc that cannot be one)."""
    parameters = json_schema(doc.get("parameters") or {"type": "dict", "properties": {}})
    parameters["type"] = "object"
    # Local and instant: no retry, and a failure would only mean the gateway itself is broken.
    return ToolMeta.from_json_schema(tool_name(str(doc.get("name", ""))), str(doc.get("description") or ""),
                                     parameters, _record, max_attempts=1, tags=("recorded",))


def recorded_gateway(docs: list[dict[str, Any]] | tuple[dict[str, Any], ...]) -> ToolGateway:
    """A gateway offering exactly these functions, as schema-only tools."""
    return ToolGateway([recorded_tool(doc) for doc in docs])


def recorded_calls(steps: list[dict[str, Any]]) -> tuple[list[tuple[str, dict[str, Any]]], int]:
    """The calls the gateway accepted and recorded, in order, an exact repeat counted once (the loop asking
    again after "recorded" is not a new request), and how many calls it refused (unknown tool, bad arguments)."""
    calls: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    refused = 0
    for step in steps:
        if not step.get("action") or step.get("node") == "approve":
            continue
        if step.get("status") != "ok":
            refused += 1
            continue
        args = step.get("action_input") if isinstance(step.get("action_input"), dict) else {}
        key = json.dumps([step["action"], args], sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            calls.append((str(step["action"]), dict(args or {})))
    return calls, refused


PY_TYPES: dict[str, type] = {"string": str, "integer": int, "float": float, "boolean": bool, "array": list,
                             "tuple": list, "dict": dict, "any": str}
_IGNORED_IN_STRINGS = re.compile(r"[ ,./\-_*^]")

Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class CallScore:
    """Whether the calls match, and if not, the first reason (one line)."""

    correct: bool
    reason: str = ""


def tool_name(function_name: str) -> str:
    """The tool name a BFCL function is offered under: providers reject dots in tool names."""
    return function_name.replace(".", "_")


def standardise(text: str) -> str:
    return _IGNORED_IN_STRINGS.sub("", text).lower().replace("'", '"')


def score_calls(functions: list[dict[str, Any]], answers: list[dict[str, Any]], calls: list[Call]) -> CallScore:
    """The run's `calls` (tool name, arguments) against the task's possible `answers`."""
    if len(calls) != len(answers):
        return CallScore(False, f"expected {len(answers)} call(s), got {len(calls)}")
    docs = {tool_name(f["name"]): f for f in functions}
    free = list(range(len(calls)))
    for entry in answers:
        ((name, allowed),) = entry.items()
        doc = docs.get(tool_name(name))
        if doc is None:
            return CallScore(False, f"the possible answer names {name}, which no function doc describes")
        reasons = []
        for index in free:
            reason = match_call(doc, allowed, calls[index])
            if reason is None:
                free.remove(index)
                break
            reasons.append(reason)
        else:
            return CallScore(False, f"no call matches {tool_name(name)}: {reasons[0] if reasons else 'none left'}")
    return CallScore(True)


def match_call(doc: dict[str, Any], allowed: dict[str, list[Any]], call: Call) -> str | None:
    """None when `call` matches the doc and the allowed values; else why not."""
    name, args = call
    if name != tool_name(doc["name"]):
        return f"called {name}"
    parameters = doc.get("parameters") or {}
    specs = parameters.get("properties") or {}
    for param in parameters.get("required") or []:
        if param not in args:
            return f"missing required argument {param!r}"
    for param, value in args.items():
        if param not in specs or param not in allowed:
            return f"unexpected argument {param!r}"
        reason = check_value(param, value, specs[param], allowed[param])
        if reason:
            return reason
    for param, values in allowed.items():
        if param not in args and "" not in values:
            return f"argument {param!r} left out, but it is not optional"
    return None


def _answer_type(allowed: list[Any]) -> type | None:
    return next((type(a) for a in allowed if a != ""), None)


def _item_type_ok(item: Any, item_type: type | None, allowed_list: list[Any]) -> bool:
    return item_type is None or type(item) is item_type or type(item) is _answer_type(allowed_list)


def check_type(param: str, value: Any, spec: dict[str, Any], allowed: list[Any]) -> tuple[str | None, bool]:
    """(why the type is wrong or None, whether the value stands for a variable and is compared as is)."""
    kind = str(spec.get("type"))
    expected = PY_TYPES.get(kind)
    answer_type = _answer_type(allowed)
    variable = answer_type is not None and expected is not None and answer_type is not expected
    if expected is None or type(value) is expected:
        items = PY_TYPES.get(str((spec.get("items") or {}).get("type"))) if kind in ("array", "tuple") else None
        if items is None or any(not isinstance(a, list) or all(_item_type_ok(v, items, a) for v in value)
                                for a in allowed):
            return None, variable
        return f"{param!r}: items of {kind} must be {items.__name__}", variable
    if answer_type is not None and type(value) is answer_type:
        return None, True
    return f"{param!r}: expected {kind}, got {type(value).__name__} ({value!r:.60})", variable


def check_value(param: str, value: Any, spec: dict[str, Any], allowed: list[Any]) -> str | None:
    """None when `value` has the right type and is among the `allowed` values."""
    if spec.get("type") == "float" and type(value) is int:
        value = float(value)  # Python would convert it; BFCL accepts it
    reason, variable = check_type(param, value, spec, allowed)
    if reason:
        return reason
    if not variable:
        item_kind = (spec.get("items") or {}).get("type")
        if isinstance(value, dict):
            return None if _dict_ok(value, allowed) else f"{param!r}: {value!r:.80} is not an allowed dict"
        if isinstance(value, list) and item_kind == "dict":
            return None if _dict_list_ok(value, allowed) else f"{param!r}: {value!r:.80} is not an allowed list"
        if isinstance(value, str):
            ok = standardise(value) in [standardise(a) for a in allowed if isinstance(a, str)]
            return None if ok else f"{param!r}: {value!r:.60} is not one of {allowed!r:.100}"
        if isinstance(value, list):
            ok = _standard_list(value) in [_standard_list(a) if isinstance(a, list) else [] for a in allowed]
            return None if ok else f"{param!r}: {value!r:.60} is not one of {allowed!r:.100}"
    return None if value in allowed else f"{param!r}: {value!r:.60} is not one of {allowed!r:.100}"


def _standard_list(values: list[Any]) -> list[Any]:
    return [standardise(v) if isinstance(v, str) else v for v in values]


def _standard(value: Any) -> Any:
    return standardise(value) if isinstance(value, str) else value


def _dict_ok(value: dict[str, Any], alloweds: list[Any]) -> bool:
    """Some allowed dict has every key of `value` with an allowed value, and allows leaving out the others."""
    for allowed in alloweds:
        if not isinstance(allowed, dict):
            continue
        keys_ok = all(k in allowed and _standard(v) in [_standard(a) for a in allowed[k]] for k, v in value.items())
        if keys_ok and all(k in value or "" in values for k, values in allowed.items()):
            return True
    return False


def _dict_list_ok(value: list[Any], alloweds: list[Any]) -> bool:
    """Some allowed list of dicts has as many dicts, each matching `value`'s at the same place."""
    return any(isinstance(allowed, list) and len(allowed) == len(value)
               and all(isinstance(v, dict) and _dict_ok(v, [a]) for v, a in zip(value, allowed, strict=True))
               for allowed in alloweds)


ALL = "all"


def call_accuracy(records: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """graph → category (each tag of the scored tasks, and "all") → runs, correct, accuracy."""
    counts: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for record in records:
        if record.get("calls_correct") is None:
            continue
        for group in (ALL, *record.get("tags", ())):
            cell = counts[record["graph"]][group]
            cell[0] += 1
            cell[1] += bool(record["calls_correct"])
    return {graph: {group: {"runs": runs, "correct": correct, "accuracy": correct / runs}
                    for group, (runs, correct) in groups.items()}
            for graph, groups in counts.items()}


def accuracy_table(accuracy: dict[str, dict[str, dict[str, Any]]]) -> str:
    """Rows: graphs; columns: all, then each category; cells: accuracy (correct/runs)."""
    groups = [ALL, *sorted({g for cells in accuracy.values() for g in cells} - {ALL})]
    lines = ["| graph | " + " | ".join(groups) + " |", "| --- |" + " ---: |" * len(groups)]
    for graph, cells in accuracy.items():
        row = [f"{cells[g]['accuracy'] * 100:.0f}% ({cells[g]['correct']}/{cells[g]['runs']})" if g in cells else "-"
               for g in groups]
        lines.append(f"| {graph} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def notices(records: list[dict[str, Any]]) -> list[str]:
    """The distinct notices (data sources and their licences) of the tasks that ran."""
    return sorted({str(r["source"]) for r in records if r.get("source")})


def call_section(records: list[dict[str, Any]]) -> list[str]:
    """The markdown lines of the tool-call section (none when no task was scored on its calls)."""
    accuracy = call_accuracy(records)
    if not accuracy:
        return []
    return ["## Tool-call accuracy (BFCL's AST checker: name, arguments, types, allowed values)", "",
            accuracy_table(accuracy), "",
            "A run counts when the calls the gateway recorded match a possible answer; the answer text is not "
            "judged (see evals/README.md).", ""]
