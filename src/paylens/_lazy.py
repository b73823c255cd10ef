"""The one way paylens imports on first use, so that importing it stays cheap: a package's
names (PEP 562: `attributes` gives its `__getattr__` and `__dir__`; type checkers see them
through the package's `TYPE_CHECKING` imports) and a client's resources (`load`)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

#: name -> (module, attribute of it, or None for the module itself); a module named from
#: "." is the package's own
Table = dict[str, tuple[str, str | None]]


def load(module_name: str, attribute: str | None, package: str | None = None) -> Any:
    """`attribute` of the module (the module itself when None), imported now if it is not
    yet; a relative `module_name` is looked up in `package`."""
    module = importlib.import_module(module_name, package)
    return module if attribute is None else getattr(module, attribute)


def attributes(
    package: str, table: Table, public: list[str], renamed: Mapping[str, str] | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`: a name of `table` is imported when first
    asked for and kept in the package; `dir()` (and so tab completion) lists `public`. A name
    of `renamed` is gone: asking for it says what to use instead."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        if renamed and name in renamed:
            raise AttributeError(f"{package}.{name} was renamed {renamed[name]}")
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = load(*table[name], package)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(public)

    return __getattr__, __dir__
