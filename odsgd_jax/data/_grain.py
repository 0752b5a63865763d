"""grain, imported once without its note on older jaxlibs.

grain says at import, through absl, on a jaxlib without its profiling hooks (0.8, for one),
that its multiprocess workers' profiling needs a newer jaxlib. These pipelines never
profile, and the line came before every run's one-line error message.
"""

import logging


class _WithoutProfilingNote(logging.Filter):

  def filter(self, record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("Grain multiprocess worker profiling")


_absl_logger = logging.getLogger("absl")
_note = _WithoutProfilingNote()
_absl_logger.addFilter(_note)
try:
  import grain
finally:
  _absl_logger.removeFilter(_note)

__all__ = ["grain"]
