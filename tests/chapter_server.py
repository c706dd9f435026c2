"""Runs chapter notebooks' inline tests one after another in one long-lived process, as `nbdev-test` does, so that
torch, scikit-learn and the package are imported once per test worker instead of once per chapter (about 5-10 s of
CPU each on a 2-core machine, ~50 chapters).

Protocol: one notebook path per line on stdin; one JSON line per notebook on stdout:
`{"path", "passed", "seconds", "cpu_seconds", "log", "rss_mb"}`, where `log` is what the notebook printed to stdout and stderr (its
traceback on a failure). Between notebooks the process puts back what a chapter may change globally: the registries
of algorithms and models, environment variables, torch's thread count and default dtype, open figures, the working
folder and `sys.path`. nbdev's own parallel runner shares its worker processes between notebooks the same way.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path


# module-level registries a chapter may add to (a toy algorithm, model, dataset, backend or Flower bridge)
REGISTRIES = ("ALGORITHMS", "MODEL_BUILDERS", "DATASETS", "_ALIASES", "BACKENDS", "BRIDGES")


def cpu_seconds() -> float:
    "CPU seconds (user + system) of this process and of every child it has waited for."
    import resource
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _rss_mb() -> float:
    try: return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError): return 0.0


def main() -> None:
    reply = os.fdopen(os.dup(1), "w", buffering=1)        # our replies; fds 1 and 2 go to each notebook's log
    from nbdev.config import get_config
    from nbdev.test import test_nb
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch
    import fedlearn_nb.engine as engine
    import fedlearn_nb.experiment  # noqa: F401  (the backends' registry)
    engine.load_algorithms()                              # every algorithm and the models its module registers

    root = Path(__file__).resolve().parents[1]
    cfg = get_config(root / "nbs")
    skip_flags = cfg.tst_flags.split() if isinstance(cfg.tst_flags, str) else list(cfg.tst_flags)
    cell_timeout = int(cfg.get("cell_timeout", 600) or 600)
    registries: dict[tuple[str, str], dict] = {}           # (module, name) -> its contents before any chapter added to it
    def keep_registries():
        for module_name, module in list(sys.modules.items()):
            if not module_name.startswith("fedlearn_nb"): continue
            for name in REGISTRIES:
                value = getattr(module, name, None)
                if isinstance(value, dict) and (module_name, name) not in registries: registries[(module_name, name)] = dict(value)
    keep_registries()
    saved = dict(environ=dict(os.environ), threads=torch.get_num_threads(), dtype=torch.get_default_dtype(), path=list(sys.path))
    spent = 0.0
    for line in sys.stdin:
        path = line.strip()
        if not path: continue
        with tempfile.TemporaryFile("w+") as log:
            sys.stdout.flush(); sys.stderr.flush()
            out, err = os.dup(1), os.dup(2)
            os.dup2(log.fileno(), 1); os.dup2(log.fileno(), 2)
            began = time.perf_counter()
            try:
                os.chdir(cfg.nbs_path)
                passed, _ = test_nb(path, skip_flags=skip_flags, basepath=cfg.config_path, cell_timeout=cell_timeout)
            except BaseException as error:                  # a notebook that kills its runner still gets a reply
                passed = False
                print(f"the chapter runner failed: {error!r}", file=sys.__stderr__)
            finally:
                sys.stdout.flush(); sys.stderr.flush()
                try: sys.__stderr__.flush()
                except Exception: pass
                os.dup2(out, 1); os.dup2(err, 2); os.close(out); os.close(err)
                plt.close("all")
                for (module_name, name), contents in registries.items():
                    registry = getattr(sys.modules[module_name], name)
                    registry.clear(); registry.update(contents)
                keep_registries()                              # modules this chapter loaded first: as it left them
                os.environ.clear(); os.environ.update(saved["environ"])
                torch.set_num_threads(saved["threads"]); torch.set_default_dtype(saved["dtype"])
                sys.path[:] = saved["path"]
                os.chdir(root)
            log.seek(0)
            text = log.read()
        now = cpu_seconds()
        reply.write(json.dumps({"path": path, "passed": bool(passed), "seconds": time.perf_counter() - began,
                                "cpu_seconds": now - spent,     # the first chapter's includes the imports
                                "log": text[-12000:], "rss_mb": _rss_mb()}) + "\n")
        spent = now


if __name__ == "__main__":
    main()
