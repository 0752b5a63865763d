"""Imports point one way (docs/DESIGN.md, "Architecture and data flow"): each package of the
project imports only packages further down this list."""

import ast
import os

from tests.helpers import REPO

LAYERS = (("experiments", "scripts"), ("configs",), ("study",), ("train",), ("strategies",),
          ("comm", "cluster"), ("parallel", "data", "models", "tasks"), ("domains", "xla_flags"))
_LAYER = {package: depth for depth, packages in enumerate(LAYERS) for package in packages}


def _package(path: str) -> str:
  parts = os.path.relpath(path, REPO).split(os.sep)
  if parts[0] != "odsgd_jax":
    return parts[0]
  return parts[1].removesuffix(".py")


def _imported(tree: ast.AST) -> set[str]:
  """The project's packages a module imports."""
  found = set()
  for node in ast.walk(tree):
    names = []
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      names = [node.module, *[f"{node.module}.{alias.name}" for alias in node.names]]
    elif isinstance(node, ast.Import):
      names = [alias.name for alias in node.names]
    for name in names:
      parts = name.split(".")
      if parts[0] == "odsgd_jax" and len(parts) > 1 and parts[1] in _LAYER:
        found.add(parts[1])
      elif parts[0] in ("configs", "experiments", "scripts"):
        found.add(parts[0])
  return found


def test_every_import_points_down_the_layers():
  upward = []
  for top in ("odsgd_jax", "configs", "experiments", "scripts"):
    for folder, _, files in os.walk(os.path.join(REPO, top)):
      for name in files:
        if not name.endswith(".py"):
          continue
        path = os.path.join(folder, name)
        package = _package(path)
        with open(path, encoding="utf-8") as f:
          tree = ast.parse(f.read())
        upward += [f"{os.path.relpath(path, REPO)} imports {target}"
                   for target in _imported(tree) - {package}
                   if _LAYER[target] <= _LAYER[package]]
  assert upward == []
  assert set(_LAYER) >= {name.removesuffix(".py") for name in os.listdir(
      os.path.join(REPO, "odsgd_jax")) if not name.startswith("_")}  # every package placed
