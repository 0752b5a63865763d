"""What values an option may take, declared once next to the code that takes it.

A strategy factory declares its options with `@declared(name=Domain, ...)`; the
optimizer and compressor options are tables of the same `Domain`s. The factory checks
its arguments through them when it is built, and the config check builds it (or reads
the table) before any data is read or anything compiled: one place says what is
allowed, and a bad value gets one line naming the field, the value and the domain.
"""

import dataclasses
import functools
import inspect
import math
from typing import Any, Callable


@dataclasses.dataclass(frozen=True)
class Domain:
  """A type and a range (numbers), a set of choices (strings), or a check of its own.

  Attributes:
    kind: "real", "int", "bool", "choice" or "other" (then `check` decides).
    low, high: bounds of a number (None: unbounded); `low_open`/`high_open` exclude them.
    choices: the allowed values of a "choice" (or of each "+"-joined part with `combine`).
    combine: a "choice" may join several of `choices` with "+" ("replay+spike").
    optional: None is allowed too (the option is off).
    schedule: a "real" may also be a schedule (a function of the step).
    check: for "other": `check(value) -> why it is not allowed, or None`.
    text: for "other": what is allowed, in words.
    per_worker: the upper bound is `high` / N, N the number of workers (EASGD's moving
      rate: at most 1/N). Checked where N is known: with the config (`num_workers`), and
      by the strategy when it is traced.
  """

  kind: str
  low: float | None = None
  high: float | None = None
  low_open: bool = False
  high_open: bool = False
  choices: tuple[str, ...] = ()
  combine: bool = False
  optional: bool = False
  schedule: bool = False
  check: Callable[[Any], str | None] | None = None
  text: str = ""
  per_worker: bool = False

  def upper(self, num_workers: int | None = None) -> float | None:
    """The upper bound with `num_workers` workers (None: unbounded). A bound of `high` / N
    with N not given is `high`, which holds for any N."""
    if not self.per_worker or self.high is None or num_workers is None:
      return self.high
    return self.high / num_workers

  def describe(self, num_workers: int | None = None) -> str:
    if self.kind == "choice":
      text = " | ".join(self.choices) + (" (or several joined by '+')" if self.combine else "")
    elif self.kind in ("real", "int"):
      left = "(" if self.low_open or self.low is None else "["
      right = ")" if self.high_open or self.high is None else "]"
      low = "-inf" if self.low is None else f"{self.low:g}"
      high = "inf" if self.high is None else f"{self.high:g}"
      if self.per_worker:
        high = f"{high}/N" + ("" if num_workers is None
                              else f" = {self.upper(num_workers):g} with {num_workers} workers")
      number = "an integer" if self.kind == "int" else "a finite number"
      text = f"{number} in {left}{low}, {high}{right}"
    elif self.kind == "bool":
      text = "True | False"
    else:
      text = self.text
    if self.schedule:
      text += " (or a schedule)"
    return text + (", or None" if self.optional else "")

  def problem(self, value: Any, num_workers: int | None = None) -> str | None:
    """Why `value` is outside the domain, or None if it is inside (a bound that depends
    on the number of workers is checked only when `num_workers` is given)."""
    if value is None:
      return None if self.optional else "must not be None"
    if self.kind == "bool":
      return None if isinstance(value, bool) else "is not a bool"
    if self.kind in ("real", "int"):
      if self.schedule and callable(value):
        return None
      return self._number_problem(value, self.upper(num_workers))
    if self.kind == "choice":
      parts = str(value).split("+") if self.combine and isinstance(value, str) else [value]
      return None if all(part in self.choices for part in parts) else "is not allowed"
    return self.check(value)

  def _number_problem(self, value: Any, high: float | None) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
      return "is not a number"
    if self.kind == "int" and not float(value).is_integer():
      return "is not an integer"
    if not math.isfinite(value):
      return "is not finite"
    if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
      return "is out of range"
    if high is not None and (value > high or (self.high_open and value == high)):
      return "is out of range"
    return None


def real(low: float | None = None, high: float | None = None, *, low_open: bool = False,
         high_open: bool = False, schedule: bool = False, per_worker: bool = False) -> Domain:
  return Domain("real", low, high, low_open, high_open, schedule=schedule,
                per_worker=per_worker)


def integer(low: int | None = None, high: int | None = None) -> Domain:
  return Domain("int", low, high)


def choice(*choices: str, combine: bool = False) -> Domain:
  return Domain("choice", choices=choices, combine=combine)


FLAG = Domain("bool")
FRACTION = real(0, 1, high_open=True)  # a momentum, a smoothing factor


class OptionError(ValueError):
  """A factory's keyword option outside its declared domain (the message starts with
  the option's name, so that a caller can prefix the config section)."""


def check_value(field: str, value: Any, domain: Domain, num_workers: int | None = None) -> None:
  """Raises `OptionError` (a ValueError), one line: the field, the value, why and what is
  allowed (with `num_workers`, also the bounds that depend on it)."""
  problem = domain.problem(value, num_workers)
  if problem is not None:
    raise OptionError(f"{field}={value!r} {problem}; allowed: {domain.describe(num_workers)}")


def declared(**domains: Domain) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
  """Decorates a factory: its keyword options are checked against `domains` (with the
  defaults filled in) on every call; `factory.domains` holds them for the config check."""

  def decorate(factory: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(factory)
    unknown = set(domains) - set(signature.parameters)
    if unknown:
      raise TypeError(f"{factory.__name__} declares domains of no option: {sorted(unknown)}")

    @functools.wraps(factory)
    def checked(*args: Any, **kwargs: Any) -> Any:
      unknown = sorted(set(kwargs) - set(signature.parameters))
      if unknown:
        options = ", ".join(sorted(domains))
        raise TypeError(f"{factory.__name__} has no option {unknown[0]!r} (options: {options})")
      bound = signature.bind(*args, **kwargs)
      bound.apply_defaults()
      for name, domain in domains.items():
        check_value(name, bound.arguments[name], domain)
      return factory(*args, **kwargs)

    checked.domains = dict(domains)
    return checked

  return decorate
