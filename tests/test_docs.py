"""The documentation holds together: README.md and docs/*.md link only to files that exist,
every generated section lives in exactly one page, names the command that writes it and
prints no zero-width interval, and the section writer finds a section in any page, with
links made relative to it."""

import os
import re

import pytest

from odsgd_jax import study

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = study.pages(ROOT)
LINK = re.compile(r"\]\(([^)\s]+)\)")
SECTION = re.compile(r"<!-- ([\w-]+):start -->(.*?)<!-- \1:end -->", re.S)


def _text(page):
  with open(page, encoding="utf-8") as f:
    return f.read()


def test_the_pages_are_the_readme_and_docs():
  names = [os.path.relpath(page, ROOT) for page in PAGES]
  assert names[0] == "README.md" and "docs/DESIGN.md" in names and len(names) > 5


@pytest.mark.parametrize("page", PAGES, ids=lambda p: os.path.relpath(p, ROOT))
def test_every_relative_link_resolves(page):
  targets = [t.split("#")[0] for t in LINK.findall(_text(page))
             if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
  missing = [t for t in targets if not os.path.exists(os.path.join(os.path.dirname(page), t))]
  assert not missing, missing


def test_every_generated_section_is_in_one_page_and_names_its_command():
  found = {}
  for page in PAGES:
    for name, body in SECTION.findall(_text(page)):
      found.setdefault(name, []).append(os.path.relpath(page, ROOT))
      assert re.search(r"produced by `python scripts/\w+\.py", body, re.IGNORECASE), name
  assert all(len(where) == 1 for where in found.values()), found
  assert {"claims", "compare_default", "benchmark", "state-sizes"} <= set(found)


def test_no_generated_section_gives_a_zero_interval():
  """A figure that does not vary (a noiseless cluster's simulated time, a share of it) is
  printed without an interval: "± 0.0" says nothing."""
  zero = re.compile(r"± 0\.0*(?![0-9])")
  for page in PAGES:
    for name, body in SECTION.findall(_text(page)):
      assert not zero.search(body), (name, zero.search(body).group())


def test_the_section_writer_finds_the_page_and_relativizes_its_links(tmp_path, monkeypatch):
  (tmp_path / "docs").mkdir()
  (tmp_path / "README.md").write_text("# front\n<!-- a:start -->\nold\n<!-- a:end -->\n")
  (tmp_path / "docs" / "page.md").write_text("# page\n<!-- b:start -->\n<!-- b:end -->\ntail\n")
  monkeypatch.setattr("odsgd_jax.study._readme.repository_root", lambda: str(tmp_path))
  page = study.replace_section("b", "table\n\n![b](docs/b.png) [code](odsgd_jax/x.py)")
  assert page == str(tmp_path / "docs" / "page.md")
  assert (tmp_path / "docs" / "page.md").read_text() == (
      "# page\n<!-- b:start -->\ntable\n\n![b](b.png) [code](../odsgd_jax/x.py)\n<!-- b:end -->\n"
      "tail\n")
  study.replace_section("a", "new ![a](docs/a.png)")
  assert (tmp_path / "README.md").read_text() == (
      "# front\n<!-- a:start -->\nnew ![a](docs/a.png)\n<!-- a:end -->\n")
  with pytest.raises(study.SectionError, match="'nosuch' must be in exactly one"):
    study.replace_section("nosuch", "text")
  empty = tmp_path / "installed"  # a package installed without its checkout
  empty.mkdir()
  monkeypatch.setattr("odsgd_jax.study._readme.repository_root", lambda: str(empty))
  with pytest.raises(study.SectionError, match="pip install -e"):
    study.replace_section("a", "text")
