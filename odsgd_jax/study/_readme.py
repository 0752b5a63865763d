"""Writes a generated section into README.md between its markers."""

import os


def repository_root() -> str:
  """The checkout this package runs from (scripts write its README and docs/)."""
  return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def replace_section(name: str, text: str, readme: str | None = None) -> None:
  """Replaces what lies between `<!-- name:start -->` and `<!-- name:end -->`."""
  readme = readme or os.path.join(repository_root(), "README.md")
  start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
  with open(readme, encoding="utf-8") as f:
    content = f.read()
  if start not in content or end not in content:
    raise SystemExit(f"error: {readme} has no {start} ... {end} markers")
  head, rest = content.split(start, 1)
  _, tail = rest.split(end, 1)
  with open(readme, "w", encoding="utf-8") as f:
    f.write(f"{head}{start}\n{text.rstrip()}\n{end}{tail}")
