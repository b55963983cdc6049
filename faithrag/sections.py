"""Configuration sections: `Section`, the base of every section, and the registry of the sections
that stages declare in their own modules. faithrag.config assembles `Config` from the core
sections and the registered ones the first time `Config` is used.

Contract:
- `@section(name)` on a Section subclass registers it as the `[name]` table of the
  configuration (`config.name` in Python); a name is registered once (ValueError for a second
  registration, or for one made after `Config` was assembled: a section must be declared where
  its stage is, which the registry imports before assembling).
- Every section refuses unknown keys, validates assignments, refuses NaN and infinities, and
  documents each key with the docstring under it (`faithrag config` prints them).

Example (in the stage's module):

    from faithrag.sections import Section, section

    @section("echo")
    class EchoConfig(Section):
        '''The echo generator (pipeline.method = "echo").'''

        shout: bool = False
        '''answer in capitals'''
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from faithrag.errors import ConfigError

S = TypeVar("S", bound=type["Section"])


class Section(BaseModel):
    """Every section: unknown keys refused, assignments validated, and every float finite (NaN
    and infinities refused, from TOML, `--set` and Python alike)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True,
                              use_attribute_docstrings=True, allow_inf_nan=False)

    def __setattr__(self, name: str, value: Any) -> None:
        """An invalid assignment is a ConfigError naming the key, as an invalid load is."""
        try:
            super().__setattr__(name, value)
        except ValidationError as exc:
            raise ConfigError(f"Bad config value for '{name}': {exc.errors()[0]['msg']}",
                              "`faithrag config` lists every key with its type and default."
                              ) from exc


_SECTIONS: dict[str, type[Section]] = {}
_sealed = False


def section(name: str) -> Callable[[S], S]:
    """Register the decorated Section subclass as the configuration section `name`; returns it
    unchanged."""
    def decorate(cls: S) -> S:
        if _sealed:
            raise ValueError(f"configuration section {name!r} is declared after Config was "
                             "assembled; declare it in the module of its stage")
        if name in _SECTIONS:
            raise ValueError(f"configuration section {name!r} is declared twice")
        _SECTIONS[name] = cls
        return cls
    return decorate


def registered() -> dict[str, type[Section]]:
    """The registered sections by name, sorted by name."""
    return dict(sorted(_SECTIONS.items()))


def seal() -> dict[str, type[Section]]:
    """The registered sections (as `registered`), none to be added from now on (Config is being
    assembled from them)."""
    global _sealed
    _sealed = True
    return registered()
