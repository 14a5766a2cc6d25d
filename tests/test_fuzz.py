"""Fuzzing the loader: mutated model bytes give a Model or ModelLoadError, never anything
else and never a crash; a mutated model that loads runs or raises an EngineError.

The mutations run in a subprocess (fuzz_models.py) so that a crash inside a native
library shows up as a failure with the seed and case number instead of killing pytest.
Set FUZZ_SEED to replay a seed, FUZZ_SECONDS to fuzz longer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from fuzz_models import mutate, seed_models

HERE = Path(__file__).parent


def test_mutations_are_deterministic_per_seed():
    seeds = seed_models()
    a = [mutate(seeds[0], seeds, np.random.default_rng(5)) for _ in range(3)]
    b = [mutate(seeds[0], seeds, np.random.default_rng(5)) for _ in range(3)]
    assert a == b and any(x != seeds[0] for x in a)


def test_fuzz_loader_only_raises_model_load_error():
    seed = int(os.environ.get("FUZZ_SEED") or int.from_bytes(os.urandom(4), "little"))
    seconds = float(os.environ.get("FUZZ_SECONDS", "12"))
    print(f"fuzz seed {seed}")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent), str(HERE)]))
    proc = subprocess.run([sys.executable, str(HERE / "fuzz_models.py"), str(seed),
                           str(seconds)], capture_output=True, text=True, env=env,
                          timeout=seconds + 120)
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    last_case = max((x["case"] for x in lines if "case" in x), default=None)
    assert proc.returncode == 0, (f"fuzz process died (code {proc.returncode}) on case "
                                  f"{last_case} of seed {seed}:\n{proc.stderr[-3000:]}")
    problems = [x for x in lines if "problem" in x]
    assert not problems, (f"seed {seed}: {len(problems)} case(s) raised something else; "
                          f"first (case {problems[0]['case']}):\n{problems[0]['problem']}")
    summary = next(x for x in lines if "summary" in x)
    print(f"fuzz: {summary['cases']} cases {summary['summary']}")
    assert summary["cases"] >= 100
    assert summary["summary"].get("rejected", 0) > 0
    assert summary["summary"].get("ran", 0) + summary["summary"].get("run-error", 0) > 0
