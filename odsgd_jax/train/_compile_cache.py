"""JAX's persistent compilation cache, for many runs of the same programs."""

import jax


def use_compilation_cache(directory: str, max_bytes: int = 2**30) -> None:
  """Keeps compiled programs in `directory`, so that runs of the same program (the
  seeds of a study, a rerun, the tests) load them instead of compiling again.

  A size limit turns on the cache's file lock, which makes it safe for several
  processes at once. Must run before the process compiles anything (JAX reads the
  setting once); the JAX_COMPILATION_CACHE_DIR environment variable does the same
  for a whole process tree.
  """
  jax.config.update("jax_compilation_cache_dir", directory)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  jax.config.update("jax_compilation_cache_max_size", max_bytes)
