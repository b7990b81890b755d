"""What a person decided about the model's calls at the approval step, as the scripted model takes it.

A model asks for a call; a person approves it, edits it, rejects it or answers it themselves. The model reads the
decision from the result, as it reads a failure: a rejected call carries the status "rejected" (in the text
protocol, the gateway's words for it), an answered one "responded", an edited one the fact `approval: "edited"`
beside its result, and the reply that asked for it now shows the person's call. The model then takes the decision:
- a rejected call ends the part it was for: no other call is tried for that part (the person said no, and a script
  cannot tell what else they would allow), and the part is named missing with that reason;
- an edited call replaces the part it was for: the part becomes what the person's call asks (the weather in the city
  they chose, the URL they gave) and is answered from its result, and the model's own call is never asked for again;
- an answered call is the part's answer, labelled as the person's.
Reflexion starts each trial from the question, so a rejection would be forgotten with the trial's messages: the
model's own lesson lists the calls a person rejected, and a later trial reads them back from its notes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .conversation import Call, Observation, Turn
from .question import Question, Task

_TASK_OF_TOOL = {"get_weather": "weather", "get_time": "time", "calculator": "calc", "http_get": "http",
                 "search": "fact", "rag_search": "fact"}
# Parts whose words come from their one call: an edit makes them the person's part (chains keep theirs).
REBUILT_KINDS = frozenset({"weather", "time", "calc", "http", "fact", "call"})


def rejected(observation: Observation, kind: str) -> bool:
    """The call was rejected by a person (`kind` is the planner's reading of its failure)."""
    return not observation.ok and kind == "rejected"


def person_calls(states: Mapping[str, Any], turn: Turn) -> dict[str, Call]:
    """The parts a person's edited calls stand for: each edited call takes the first part still waiting for its
    own first call, one whose call would use the same tool first (the call it replaced), else any."""
    taken: dict[str, Call] = {}
    for observation in (o for o in turn.observations if o.edited):
        open_parts = [s for key, s in states.items() if key not in taken and s.next_call is not None
                      and not s.failures]
        part = next((s for s in open_parts if s.next_call.name == observation.call.name),
                    open_parts[0] if open_parts else None)
        if part is not None:
            taken[part.task.key] = observation.call
    return taken


def task_for_call(call: Call, task: Task) -> Task:
    """The part as the person's call asks it: the weather in their city, their URL, their query."""
    args, kind = call.args, _TASK_OF_TOOL.get(call.name, "call")
    params: dict[str, Any]
    if kind == "weather":
        params = {"city": str(args.get("city") or "")}
    elif kind == "time":
        tz = str(args.get("timezone") or "")
        params = {"city": tz, "tz": tz}
    elif kind == "calc":
        params = {"expression": str(args.get("expression") or "")}
    elif kind == "http":
        params = {"url": str(args.get("url") or "")}
    elif kind == "fact":
        query = str(args.get("query") or "")
        params = {"query": query, "clause": query, "name_wanted": False,
                  **({"documents": query} if call.name == "rag_search" else {})}
    else:
        params = {"tool": call.name, "args": dict(args)}
    return Task(task.key, kind, {**params, "person_call": True}, needs=(), shown=True)


def with_person_calls(question: Question, taken: Mapping[str, Call]) -> Question:
    """The question with each part a person's call replaced asked as that call asks it."""
    tasks = [task_for_call(taken[t.key], t) if t.key in taken and t.kind in REBUILT_KINDS else t
             for t in question.tasks]
    return Question(text=question.text, lang=question.lang, tasks=tasks, compare=question.compare,
                    unhandled=question.unhandled, unresolved=question.unresolved, chain=question.chain)
