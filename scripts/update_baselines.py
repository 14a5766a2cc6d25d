"""Regenerate the conformance baselines in tests/baselines (one backend or all).

    python scripts/update_baselines.py            # every backend that can run here
    python scripts/update_baselines.py cpu        # one backend

A baseline lists the cases that pass now; tests/test_conformance.py fails when one of
them stops passing. GPU baselines are written only when a GPU adapter is available.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.conformance import run_conformance  # noqa: E402
from engine.errors import BackendUnavailableError  # noqa: E402

BACKENDS = ("cpu", "gpu-compute", "gpu-pixel")


def update(backend: str, out_dir: Path) -> dict:
    result = run_conformance(backend)
    passing = sorted(result["passing"])
    native = sorted(result["native"])
    data = {"backend": result["backend"], "total": result["total"],
            "passed": len(passing), "passed_natively": len(native), "passing": passing,
            "native": native}
    path = out_dir / f"conformance_{backend}.json"
    path.write_text(json.dumps(data, indent=1) + "\n")
    return data


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("backend", nargs="?", default="all", choices=(*BACKENDS, "all"))
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "baselines")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    chosen = BACKENDS if args.backend == "all" else (args.backend,)
    for backend in chosen:
        if backend != "cpu":
            try:
                from engine.backends.gpu_common import get_device

                get_device()
            except (BackendUnavailableError, ImportError, Exception) as exc:
                print(f"{backend}: skipped, no GPU adapter ({exc})")
                continue
        data = update(backend, args.out)
        print(f"{backend}: {data['passed']} of {data['total']} pass -> "
              f"{args.out / f'conformance_{backend}.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
