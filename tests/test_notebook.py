"""experiments/colab.ipynb runs on CPU: its Python cells, in order, in a fresh process.

Shell and magic lines (!git, %pip, %cd) are Colab's install steps; here the package is
already installed and the repository is the working directory.
"""

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOK = os.path.join(REPO, "experiments", "colab.ipynb")


def _python_of(notebook_path):
  with open(notebook_path, encoding="utf-8") as f:
    cells = json.load(f)["cells"]
  lines = [line for cell in cells if cell["cell_type"] == "code"
           for line in "".join(cell["source"]).splitlines() + [""]]
  return "\n".join(line for line in lines if not line.lstrip().startswith(("!", "%")))


def test_the_colab_notebook_runs_the_default_experiment(data_dir, tmp_path):
  script = tmp_path / "colab.py"
  script.write_text(_python_of(NOTEBOOK))
  os.makedirs(tmp_path / "runs", exist_ok=True)
  result = subprocess.run(
      [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=500,
      env={**os.environ, "PYTHONPATH": REPO, "TFDS_DATA_DIR": data_dir, "JAX_PLATFORMS": "cpu",
           "MPLBACKEND": "Agg"})
  assert result.returncode == 0, result.stderr[-3000:]
  assert "test accuracy 0.9" in result.stdout  # the default config's result, as in the README
  assert (tmp_path / "runs" / "colab" / "curves.png").stat().st_size > 10_000
