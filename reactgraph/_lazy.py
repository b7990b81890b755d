"""Package attributes imported on first use (PEP 562), so importing a package costs nothing until it is used."""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any


def lazy_attributes(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`, whose public names live in the modules `exports` names."""

    def __getattr__(name: str) -> Any:  # noqa: N807 - becomes the package's PEP 562 hook
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        globals_of_package = import_module(package).__dict__
        globals_of_package[name] = value  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:  # noqa: N807 - becomes the package's PEP 562 hook
        return sorted({*import_module(package).__dict__, *exports})

    return __getattr__, __dir__
