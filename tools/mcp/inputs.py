"""VS Code's variables in an MCP config, resolved when the config is read: `${workspaceFolder}` and its kin, and
`${input:id}`, a value the user is asked for, declared in the file's `inputs`.

VS Code asks for an input when a server that uses it first starts. Here its value comes from the environment
variable REACTGRAPH_MCP_INPUT_<ID> (the id upper-cased, each character other than a letter or digit as `_`:
`api-key` → REACTGRAPH_MCP_INPUT_API_KEY), else from the person at the terminal (a password input without echo).
With neither, the server that needs it is not started, and one line names the input and the variable: the rest of
the config's servers still start (VS Code likewise leaves such servers out where nobody can be asked).

Variables naming editor state (`${file}`, `${selectedText}`, `${config:…}`, `${command:…}`, …) have no value
outside the editor; a server whose settings use one is not started either, in one line naming the variable.
Passing the text on as written would hand the server a path or token that is not one.
"""

from __future__ import annotations

import getpass
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reactgraph.errors import ReactGraphError

ENV_PREFIX = "REACTGRAPH_MCP_INPUT_"
_INPUT = re.compile(r"\$\{input:([^}]*)\}")
_PREDEFINED = re.compile(r"\$\{(workspaceFolder|workspaceFolderBasename|userHome|cwd|pathSeparator|/)\}")
# VS Code's other predefined variables: the open editor's state, its settings and commands
_EDITOR_ONLY = re.compile(r"\$\{((?:config|command|workspaceFolder):[^}]*|file|fileWorkspaceFolder|relativeFile"
                          r"|relativeFileDirname|fileBasename|fileBasenameNoExtension|fileExtname|fileDirname"
                          r"|fileDirnameBasename|lineNumber|selectedText|execPath|defaultBuildTask)\}")
_KINDS = ("promptString", "pickString", "command")
_PICK_ATTEMPTS = 3


class InputUnavailable(ReactGraphError):
    """No value for an input: nobody to ask, the answer ended (Ctrl-D), or a VS Code command input."""


@dataclass(frozen=True, slots=True)
class Input:
    """One entry of VS Code's `inputs`."""

    id: str
    kind: str
    description: str = ""
    password: bool = False
    default: str | None = None
    options: tuple[str, ...] = ()

    @property
    def env_var(self) -> str:
        return ENV_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", self.id).upper()


def workspace_folder(source: str) -> Path:
    """What `${workspaceFolder}` names: for a `.vscode/mcp.json`, the folder holding `.vscode` (VS Code's
    workspace); for any other config (a user-profile `mcp.json`, a file of ours, a dict) the current directory,
    where the command runs, as VS Code's is the folder it has open."""
    if source != "config" and (folder := Path(source).parent).name == ".vscode":
        return folder.parent
    return Path.cwd()


def predefined(settings: Any, source: str) -> tuple[Any, str]:
    """`settings` with VS Code's predefined variables replaced in every string, and the first variable that only
    the editor knows ("" if none)."""
    folder = workspace_folder(source)
    values = {"workspaceFolder": str(folder), "workspaceFolderBasename": folder.name, "userHome": str(Path.home()),
              "cwd": os.getcwd(), "pathSeparator": os.sep, "/": os.sep}
    found: list[str] = []

    def one(text: str) -> str:
        if editor := _EDITOR_ONLY.search(text):
            found.append(editor.group(0))
        return _PREDEFINED.sub(lambda match: values[match.group(1)], text)

    return _each_string(settings, one), (found[0] if found else "")


def parse_inputs(value: object) -> dict[str, Input]:
    """The `inputs` array of a VS Code `mcp.json`, by id; a malformed one raises ValueError (one line)."""
    if value is None:
        return {}
    if not isinstance(value, list):
        raise ValueError("MCP config: 'inputs' must be a list of objects (VS Code's input variables)")
    inputs: dict[str, Input] = {}
    for item in value:
        if not isinstance(item, Mapping) or not isinstance(item.get("id"), str) or not item["id"]:
            raise ValueError(f"MCP config: each of 'inputs' must be an object with an 'id', not {str(item)[:60]}")
        where = f"MCP config: input {item['id']!r}"
        if item.get("type") not in _KINDS:
            raise ValueError(f"{where}: 'type' must be one of {', '.join(map(repr, _KINDS))}")
        if item["id"] in inputs:
            raise ValueError(f"{where}: declared twice")
        inputs[item["id"]] = _input(where, item)
    return inputs


def _input(where: str, item: Mapping[str, Any]) -> Input:
    # other keys (VS Code's `command`, `args` of a command input) are the editor's and go unread
    description, password, default = item.get("description", ""), item.get("password", False), item.get("default")
    options = [o.get("value") if isinstance(o, Mapping) else o for o in item.get("options", [])]  # {label, value}
    if not isinstance(description, str) or not isinstance(password, bool) or not isinstance(default, str | None):
        raise ValueError(f"{where}: 'description' and 'default' must be strings, 'password' true or false")
    strings = [option for option in options if isinstance(option, str)]
    if len(strings) != len(options):
        raise ValueError(f"{where}: 'options' must be strings (or objects with a string 'value')")
    return Input(item["id"], item["type"], description, password, default, tuple(strings))


def references(settings: Any) -> list[str]:
    """The input ids a server's settings name, in order of first use."""
    found: list[str] = []

    def collect(text: str) -> str:
        found.extend(_INPUT.findall(text))
        return text

    _each_string(settings, collect)
    return list(dict.fromkeys(found))


def substitute(settings: Any, values: Mapping[str, str]) -> Any:
    return _each_string(settings, lambda text: _INPUT.sub(lambda match: values[match.group(1)], text))


def _each_string(value: Any, change: Callable[[str], str]) -> Any:
    """`value` with `change` applied to every string in it (in lists and objects too; keys are left alone)."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, list):
        return [_each_string(item, change) for item in value]
    if isinstance(value, Mapping):
        return {key: _each_string(item, change) for key, item in value.items()}
    return value  # numbers, flags, and the Python objects a dict config may hold (an httpx.Auth)


class Answers:
    """The inputs' values for one reading of a config: each found or asked for at most once (VS Code keeps an
    answer too), from the environment, else the terminal (`ask`; None: there is none)."""

    def __init__(self, inputs: Mapping[str, Input], ask: Callable[[Input, str], str] | None) -> None:
        self.inputs, self._ask = inputs, ask
        self._values: dict[str, str] = {}

    def values(self, ids: list[str], server: str) -> dict[str, str]:
        """The values of `ids` for `server`'s settings; InputUnavailable (one line) for the first missing."""
        for input_id in ids:
            if input_id not in self._values:
                self._values[input_id] = self._value(self.inputs[input_id], server)
        return {input_id: self._values[input_id] for input_id in ids}

    def _value(self, item: Input, server: str) -> str:
        if (given := os.environ.get(item.env_var)) is not None:
            return given
        how = f"set {item.env_var}"
        if item.kind == "command":
            raise InputUnavailable(f"its input {item.id!r} is a VS Code command input, which only VS Code can run; "
                                   f"{how}")
        if self._ask is None:
            raise InputUnavailable(f"its input {item.id!r} (${{input:{item.id}}}) needs an answer and no terminal "
                                   f"is there to ask; {how}")
        try:
            return self._ask(item, server)
        except EOFError:
            raise InputUnavailable(f"no answer for its input {item.id!r}; {how} or answer at the prompt") from None


def terminal_ask() -> Callable[[Input, str], str] | None:
    """The prompt at this process's terminal, or None when stdin is not one (a pipe, a service, a notebook)."""
    stdin = sys.stdin
    try:
        interactive = stdin is not None and stdin.isatty()
    except ValueError:  # closed
        interactive = False
    return ask if interactive else None


def ask(item: Input, server: str) -> str:
    """Ask for one input on stderr (stdout stays the command's output); a password input without echo.
    Enter alone takes the default; a pick takes an option or its number."""
    label = item.description or item.id
    choices = "".join(f"\n  {number}) {option}" for number, option in enumerate(item.options, 1))
    default = f" [{item.default}]" if item.default is not None and not item.password else ""
    prompt = f"MCP server {server!r} needs {label} (input {item.id!r}){choices}\n{label}{default}: "
    for _ in range(_PICK_ATTEMPTS):
        answer = _read(prompt, item.password)
        if not answer and item.default is not None:
            answer = item.default
        if not item.options or answer in item.options:
            return answer
        if answer.isdigit() and 1 <= int(answer) <= len(item.options):
            return item.options[int(answer) - 1]
        prompt = f"one of the options above, or its number{default}: "
    raise InputUnavailable(f"its input {item.id!r} was not answered with one of its options")


def _read(prompt: str, password: bool) -> str:
    if password:
        return getpass.getpass(prompt, stream=sys.stderr)
    sys.stderr.write(prompt)
    sys.stderr.flush()
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line.rstrip("\r\n")
