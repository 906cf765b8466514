"""actsim from Python: the CLI's verbs as functions.

Keyword arguments are the CLI's flags (``batch=4`` is ``--batch 4``, ``num_microbatches=8`` is
``--num-microbatches 8``); values are ints, floats, strings, booleans (``sp=True`` is ``--sp on``),
or lists, tuples and ranges, which become the CLI's comma lists and ``start:stop:step`` ranges.
Rows are dicts keyed by the columns of CSV schema v1 (``actsim.columns()``) with the values the
CLI's CSV holds: empty fields are None, ``true``/``false`` are bools, numbers are ints or floats.
Bad input raises :class:`ConfigError` carrying the CLI's one-line message.

    >>> import actsim, pandas
    >>> rows = actsim.run(model="gpt2-small", batch=[1, 2], strategy="none,full")
    >>> df = pandas.DataFrame(list(actsim.sweep(model="gpt2-small", seq=range(512, 2049, 512))))
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterator, List

from . import _core
from ._core import ConfigError

__all__ = ["ConfigError", "columns", "explain_peak", "models", "plan", "run", "sweep", "valley"]

# The package's own folder: its models/ (with devices/) is searched after $ACTSIM_MODELS.
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

# Flags the package decides itself: where output goes, and sweep's file-based resumption.
_REFUSED = {"format", "output", "o", "resume"}


def _text(flag: str, value: Any) -> str:
    """One value as the CLI's text."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return value
    if isinstance(value, range):
        if len(value) == 0:
            raise ConfigError(f"{flag}: {value!r}: an empty range has no values")
        if len(value) == 1:
            return str(value[0])
        if value.step > 0:  # the CLI's inclusive start:stop:step
            return f"{value.start}:{value[-1]}:{value.step}"
        return ",".join(str(v) for v in value)
    if isinstance(value, (list, tuple)):
        if not value:
            raise ConfigError(f"{flag}: []: an empty list has no values")
        parts = []
        for item in value:
            if isinstance(item, (list, tuple)):
                raise ConfigError(f"{flag}: {value!r}: lists do not nest")
            parts.append(_text(flag, item))
        return ",".join(parts)
    raise ConfigError(f"{flag}: {value!r}: expected an int, float, str, bool, list or range, "
                      f"not {type(value).__name__}")


def _args(verb: str, kwargs: Dict[str, Any]) -> List[str]:
    """The command line `actsim VERB --flag=value ...` the keyword arguments spell."""
    args = ["actsim", verb]
    for key, value in kwargs.items():
        if value is None:
            continue  # the flag's default
        flag = ("-" if len(key) == 1 else "--") + key.replace("_", "-")
        if key in _REFUSED:
            raise ConfigError(f"{flag}: not taken from Python (rows are returned, not written)")
        args.append(f"{flag}={_text(flag, value)}")
    return args


def columns() -> List[str]:
    """CSV schema v1's columns, in order (the keys of every row)."""
    return list(_core.columns())


def run(**flags: Any) -> List[Dict[str, Any]]:
    """`actsim run`: one row per configuration, in configuration order. A configuration that
    cannot be simulated raises ConfigError (sweep makes it a row instead)."""
    return _core.run(_args("run", flags), _PACKAGE_DIR)


def sweep(**flags: Any) -> Iterator[Dict[str, Any]]:
    """`actsim sweep`: rows in configuration order, computed on every core (``jobs=N`` to
    limit, ``shard="i/N"`` for a part) while the caller consumes them. A configuration that
    cannot be simulated is a row with its ``error``. Dropping the iterator stops the sweep."""
    return _core.SweepIterator(_args("sweep", flags), _PACKAGE_DIR)


def plan(budget: Any, **flags: Any) -> Dict[str, Any]:
    """`actsim plan --budget BUDGET`: the least-recompute plan whose simulated peak fits, as its
    row (the strategy column holds the plan's custom: spec, runnable again)."""
    if isinstance(budget, int) and not isinstance(budget, bool):
        budget = str(budget)
    return _core.plan(_args("plan", {"budget": budget, **flags}), _PACKAGE_DIR)


def valley(**flags: Any) -> List[Dict[str, Any]]:
    """`actsim valley --format csv`: peak memory against m evenly spaced checkpoints, m = 1..n."""
    return _core.valley(_args("valley", flags), _PACKAGE_DIR)


def explain_peak(top: int = 8, **flags: Any) -> List[Dict[str, Any]]:
    """The `top` largest storages live at one configuration's peak, largest first (the table
    `actsim run` prints): bytes, count, category, block (None: several or none), what, why."""
    if not isinstance(top, int) or isinstance(top, bool) or top < 1:
        raise ConfigError(f"top: {top!r}: expected a positive int")
    return _core.explain_peak(_args("run", flags), _PACKAGE_DIR, top)


def models() -> Dict[str, List[Any]]:
    """`actsim models`: {"models": [...], "devices": [...], "searched": [folders]}; a file that
    does not load has an "error" instead of its figures."""
    return _core.catalog(_PACKAGE_DIR)
