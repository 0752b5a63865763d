"""Writes a generated section into the page of README.md or docs/ that holds its markers."""

import glob
import os
import re


class SectionError(LookupError):
  """No page, or more than one, holds a generated section's markers."""


class SectionDiffers(SectionError):
  """A generated section checked (`--check`) holds other text than its command gives."""


def repository_root() -> str:
  """The checkout this package runs from (scripts write its README and docs/): the pages
  are not part of an installed package, so a section is written into the checkout an
  editable install (`pip install -e .`) points at, whatever the working directory."""
  return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pages(root: str | None = None) -> list[str]:
  """README.md and the pages of docs/: where generated sections live."""
  root = root or repository_root()
  return [os.path.join(root, "README.md"), *sorted(glob.glob(os.path.join(root, "docs", "*.md")))]


def _relative_links(text: str, root: str, page: str) -> str:
  """Links of `text` that name a file by its path from the repository root (an image in
  docs/), made relative to `page`."""
  def relative(match: re.Match) -> str:
    target = os.path.relpath(os.path.join(root, match.group(2)), os.path.dirname(page))
    return f"{match.group(1)}({target})"
  return re.sub(r"(\]\s*)\((?![a-z]+:|#|/)([^)\s]+)\)", relative, text)


def section_page(name: str, page: str | None = None) -> str:
  """The one page (README.md or docs/*.md, or `page`) that holds the generated section
  `name` between `<!-- name:start -->` and `<!-- name:end -->`; a script checks its
  --readme with this before any run, so that nothing is trained for a section it cannot
  write.

  Raises:
    SectionError: no page holds the markers, or more than one does.
  """
  start, end = _markers(name)
  root = repository_root()
  candidates = [page] if page else [p for p in pages(root) if os.path.exists(p)]
  if not candidates:
    raise SectionError(f"no README.md or docs/ next to the package in {root}: generated "
                       f"sections are written into a checkout installed with pip install -e .")
  holders = []
  for candidate in candidates:
    with open(candidate, encoding="utf-8") as f:
      content = f.read()
    if start in content and end in content:
      holders.append(candidate)
  if len(holders) != 1:
    where = ", ".join(os.path.relpath(p, root) for p in holders) or "no page"
    raise SectionError(f"--readme {name!r}: the generated section {name!r} must be in exactly "
                       f"one of README.md and docs/*.md (between {start} and {end}); found in "
                       f"{where}")
  return holders[0]


def _markers(name: str) -> tuple[str, str]:
  return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def replace_section(name: str, text: str, page: str | None = None, check: bool = False) -> str:
  """Replaces what lies between `<!-- name:start -->` and `<!-- name:end -->` in the one
  page (README.md or docs/*.md, or `page`) that holds them; returns that page. Paths in
  `text`'s links are from the repository root, as the scripts write them. `check`: write
  nothing, only raise `SectionDiffers` where the page holds other text.

  Raises:
    SectionError: no page holds the markers, or more than one does.
    SectionDiffers: `check`, and the section is not `text`.
  """
  start, end = _markers(name)
  page = section_page(name, page)
  with open(page, encoding="utf-8") as f:
    content = f.read()
  head, rest = content.split(start, 1)
  _, tail = rest.split(end, 1)
  text = _relative_links(text.rstrip(), repository_root(), page)
  if check:
    if rest.split(end, 1)[0] != f"\n{text}\n":
      raise SectionDiffers(f"the generated section {name!r} of {os.path.relpath(page)} is not "
                           f"what this command gives: regenerate it (the same command without "
                           f"--check)")
    return page
  with open(page, "w", encoding="utf-8") as f:
    f.write(f"{head}{start}\n{text}\n{end}{tail}")
  return page
