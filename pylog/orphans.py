"""Child processes that die with their parent: no orphans left by a crash.

Linux's parent-death signal (prctl PR_SET_PDEATHSIG) reaches a child when
the thread that forked it dies, SIGKILL included, which no handler of the
parent's can do.  util-linux's ``setpriv --pdeathsig`` sets it and execs the
command, so the child's pid is the command's own and no ``preexec_fn`` (unsafe
with threads) is needed.
"""

from __future__ import annotations

import shutil


def die_with_parent(signal_name: str = "TERM") -> list[str]:
    """The prefix for a command line that gets ``SIG<signal_name>`` when the
    thread starting it dies; empty where setpriv is missing (not Linux)."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", signal_name] if setpriv else []
