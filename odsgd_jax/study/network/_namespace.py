"""A network namespace whose loopback is shaped with `tc`: the emulated network of a
measured case. Its processes talk over its own loopback only; it is removed on every
way out, the processes in it killed first."""

import contextlib
import os
import shutil
import subprocess
from typing import Iterator

MTU = 9000  # gloo's messages stall when a bucket's burst is below the loopback's MTU
BURST_BYTES = 64 * 1024  # a few MTUs: short messages do not pass unshaped


class NamespaceError(RuntimeError):
  """The namespace cannot be made or shaped here (no root, no `ip`/`tc`, no netem)."""


def _run(*command: str) -> None:
  done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=30)
  if done.returncode:
    raise NamespaceError(f"`{' '.join(command)}` failed: {done.stderr.strip() or done.stdout}")


def can_emulate() -> str | None:
  """Why a shaped namespace cannot be made here, or None."""
  if os.geteuid() != 0:
    return "emulating a network needs root (network namespaces and tc); run as root or use --plain"
  missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
  if missing:
    return (f"emulating a network needs {' and '.join(missing)} (iproute2); install it or "
            f"use --plain")
  return None


def netem_available(name: str) -> bool:
  """Whether this kernel has the netem qdisc (a delay needs it), tried in namespace `name`."""
  done = subprocess.run(["ip", "netns", "exec", name, "tc", "qdisc", "add", "dev", "lo", "root",
                         "handle", "9:", "netem", "delay", "1ms"], capture_output=True,
                        check=False, timeout=30)
  if done.returncode == 0:
    _run("ip", "netns", "exec", name, "tc", "qdisc", "del", "dev", "lo", "root")
  return done.returncode == 0


@contextlib.contextmanager
def shaped_namespace(name: str, rate_mbit: float, delay_ms: float) -> Iterator[list[str]]:
  """A namespace `name` whose loopback carries `rate_mbit` (tbf: every process's traffic
  shares it, as one link) after a one-way `delay_ms` per packet (netem). Yields the
  command prefix that runs a program inside it; removes it afterwards, also on failure."""
  problem = can_emulate()
  if problem:
    raise NamespaceError(problem)
  subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False, timeout=30)
  _run("ip", "netns", "add", name)
  try:
    inside = ["ip", "netns", "exec", name]
    _run(*inside, "ip", "link", "set", "lo", "mtu", str(MTU))
    _run(*inside, "ip", "link", "set", "lo", "up")
    tbf = ["tbf", "rate", f"{rate_mbit:g}mbit", "burst", str(BURST_BYTES), "latency", "1s"]
    if delay_ms > 0:
      if not netem_available(name):
        raise NamespaceError(
            f"a delay of {delay_ms:g} ms needs the netem qdisc, which this kernel lacks "
            f"(sch_netem); measure with --delays_ms 0, or on a kernel that has it")
      _run(*inside, "tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:", "netem", "delay",
           f"{delay_ms:g}ms", "limit", "100000")
      _run(*inside, "tc", "qdisc", "add", "dev", "lo", "parent", "1:", "handle", "2:", *tbf)
    else:
      _run(*inside, "tc", "qdisc", "add", "dev", "lo", "root", *tbf)
    yield inside
  finally:
    subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False, timeout=30)
