"""experiments/colab.ipynb runs as Colab runs it, install cells included, on a CPU.

Its cells run in order in one fresh Python (a kernel: the working directory on the path),
in an empty folder. Shell lines (`!`) run in a shell with `$NAME` taken from the
notebook's variables, `%cd` changes directory and `%pip` is this Python's pip, as IPython
does. `REPO_URL` is set to this checkout, the edit the notebook asks of its user; `%pip
install -e .` installs the clone into a virtual environment that sees this environment's
packages, so the test leaves the environment as it was. The run is the default config
shortened to 600 steps (the `steps=N` variant), to keep the suite's time.
"""

import json
import os
import re
import subprocess
import venv

from configs import _strategies, default
from odsgd_jax.train import validate_config

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOK = os.path.join(REPO, "experiments", "colab.ipynb")

PRELUDE = '''
import os, re, subprocess, sys
def _shell(command):
  command = re.sub(r"\\$(\\w+)", lambda m: str(globals().get(m.group(1), m.group(0))), command)
  subprocess.run(command, shell=True, check=True)
def _cd(folder):
  os.chdir(folder)
'''


def _as_kernel_script(cells, repo_url: str) -> str:
  """The code cells as one script: IPython's `!`, `%cd` and `%pip` lines as calls."""
  lines = [PRELUDE]
  for cell in cells:
    if cell["cell_type"] != "code":
      continue
    for line in "".join(cell["source"]).splitlines():
      indent = line[:len(line) - len(line.lstrip())]
      code = line.strip()
      if code.startswith("REPO_URL ="):
        lines.append(f"{indent}REPO_URL = {repo_url!r}")
      elif "default.get_config()" in code:
        lines.append(line.replace("default.get_config()", 'default.get_config("steps=600")'))
      elif code.startswith("!"):
        lines.append(f"{indent}_shell({code[1:]!r})")
      elif code.startswith("%cd"):
        target = re.sub(r"^%cd\s+(-q\s+)?", "", code)
        expression = target[1:-1] if target.startswith("{") else repr(target)
        lines.append(f"{indent}_cd({expression})")
      elif code.startswith("%pip"):
        lines.append(f"{indent}_shell(sys.executable + ' -m pip' + {code[4:]!r})")
      else:
        lines.append(line)
  return "\n".join(lines) + "\n"


def test_the_colab_notebook_installs_and_runs_the_default_experiment(data_dir, tmp_path):
  with open(NOTEBOOK, encoding="utf-8") as f:
    cells = json.load(f)["cells"]
  environment = tmp_path / "venv"
  venv.create(environment, system_site_packages=True, with_pip=True)
  python = str(environment / "bin" / "python")
  runtime = tmp_path / "colab"
  runtime.mkdir()
  result = subprocess.run(
      [python, "-"], input=_as_kernel_script(cells, "file://" + REPO), cwd=runtime,
      capture_output=True, text=True, timeout=600,
      env={**os.environ, "TFDS_DATA_DIR": data_dir, "JAX_PLATFORMS": "cpu", "MPLBACKEND": "Agg",
           "PYTHONPATH": ""})
  assert result.returncode == 0, result.stderr[-3000:]
  clone = runtime / "odsgd_jax"
  assert (clone / "pyproject.toml").exists()  # the install cell cloned and installed it
  assert "test accuracy 0.8" in result.stdout or "test accuracy 0.9" in result.stdout
  assert (clone / "runs" / "colab" / "curves.png").stat().st_size > 10_000


def test_the_notebooks_suggested_strategy_switches_are_valid():
  text = "".join("".join(cell["source"]) for cell in json.load(open(NOTEBOOK))["cells"])
  assert 'default.get_config("ssgd")' in text and "_strategies.use_strategy(config" in text
  validate_config(default.get_config("ssgd"), 8)
  validate_config(_strategies.use_strategy(default.get_config(), "pseudo_sync"), 8)
  assert "--config configs/default.py:ssgd" in text
