"""The package stays readable: no function has more than 80 lines below its docstring."""

import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "odsgd_jax"
LIMIT = 80


def _lengths():
  for path in sorted(PACKAGE.rglob("*.py")):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        body = node.body
        if (isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)):
          body = body[1:]  # the docstring
        if body:
          yield f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}", (
              body[-1].end_lineno - body[0].lineno + 1)


def test_no_function_is_longer_than_80_lines_below_its_docstring():
  lengths = dict(_lengths())
  assert len(lengths) > 100  # the walk found the package's functions
  too_long = {name: n for name, n in lengths.items() if n > LIMIT}
  assert not too_long, too_long
