"""Run a module's main under a profiler and write the result on exit.

    python -m bench.cpu_profile OUT.prof MODULE [ARGS...]

cProfile with a CPU-time clock (`python -m cProfile` measures wall time, which on a busy
machine charges a function for the time its process waited for a CPU). cProfile inflates
call-heavy code many times over, so when `pyinstrument` is importable (for instance from
`pip install --target DIR pyinstrument` and `PYTHONPATH=DIR`) a sampling profile is also
written next to it as OUT.txt, which is the one to believe for proportions.
"""

from __future__ import annotations

import cProfile
import runpy
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any


def main() -> None:
    out, module, *args = sys.argv[1:]
    prof = cProfile.Profile(time.process_time)

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    sys.argv = [module, *args]
    sampler: Any = None
    try:
        from pyinstrument import Profiler  # optional, not a dependency

        sampler = Profiler(interval=0.001, async_mode="disabled")
    except ImportError:
        prof.enable()
    else:
        sampler.start()
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        if sampler is not None:
            sampler.stop()
            Path(out).with_suffix(".txt").write_text(
                sampler.output_text(unicode=False, color=False, show_all=False))
            # The whole session, to render again with other options
            # (`pyinstrument --load OUT.pyisession --show-all`).
            sampler.last_session.save(str(Path(out).with_suffix(".pyisession")))
        else:
            prof.disable()
            prof.dump_stats(out)


if __name__ == "__main__":
    main()
