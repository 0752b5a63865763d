"""The clock against this codebase's own runs on a real or emulated network: the
measurement driver (`measure`), its cases and predictions (`_cases`), the shaped
namespace (`_namespace`), the timed processes (`timing`, `overlap`) and the report."""

import os

from odsgd_jax.study.network import measure as measure  # noqa: F401
from odsgd_jax.study.network._cases import ENTRIES as ENTRIES
from odsgd_jax.study.network._cases import GRIDS as GRIDS
from odsgd_jax.study.network._cases import MODELS as MODELS
from odsgd_jax.study.network._cases import Network as Network
from odsgd_jax.study.network._cases import networks as networks
from odsgd_jax.study.network._cases import scores as scores
from odsgd_jax.study.network._namespace import BURST_BYTES
from odsgd_jax.study.network._namespace import NamespaceError as NamespaceError
from odsgd_jax.study.network._namespace import can_emulate as can_emulate
from odsgd_jax.study.network._namespace import shaped_namespace as shaped_namespace
from odsgd_jax.study.network.measure import MeasureError as MeasureError


def report_text(records: str) -> str:
  """The generated section: the emulation, the overlap probe, each grid's scores and cases."""
  from odsgd_jax.study.network import _report
  cases = measure.load_cases(records)
  lines = ["Produced by `python scripts/measure_network.py --phase report --readme` from "
           f"`{records}/` (measured with `--emulate`: jax.distributed over gloo, P processes "
           "with one CPU device each, in a network namespace whose loopback (MTU 9000) is "
           f"shaped by tbf with a {BURST_BYTES} byte burst; every process's traffic "
           "shares it; each strategy's step is the training loop's, on random inputs; the "
           "median of 3 timed windows after compilation and warm-up).", ""]
  overlap = os.path.join(records, measure.OVERLAP)
  if os.path.exists(overlap):
    lines += _report.overlap_table(measure.read_json(overlap))
  for grid, spec in GRIDS.items():
    keys = {n.key for n in networks(**spec)}
    chosen = {k: v for k, v in cases.items() if k.split("/", 1)[0] in keys}
    if chosen:
      lines += _report.scores_table(scores(chosen), grid)
  lines += _report.cases_table(cases)
  return "\n".join(lines).rstrip() + "\n"
