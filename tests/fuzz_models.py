"""Mutation fuzzing of ModelLoader.load (run as a subprocess by test_fuzz.py).

``python fuzz_models.py SEED SECONDS`` mutates valid model bytes (truncation, bit flips,
byte overwrites, deletions, splices within and across models) for SECONDS and prints one
JSON line per problem, then a summary line. Before each case it prints the case number,
so that a crash (a signal) can be replayed from the seed.
"""

from __future__ import annotations

import json
import resource
import sys
import time
import traceback

import numpy as np
from modelgen import I64, F, elementwise_chain, if_model, model
from onnx import helper, numpy_helper

MAX_INPUT_ELEMENTS = 1 << 16


def seed_models() -> list[bytes]:
    """Valid models covering initializers, subgraphs, shape chains and attributes."""
    body = helper.make_graph(
        [helper.make_node("Add", ["acc", "w"], ["acc_out"]),
         helper.make_node("Identity", ["c"], ["c_out"])], "body",
        [helper.make_tensor_value_info("i", I64, []),
         helper.make_tensor_value_info("c", 9, []),
         helper.make_tensor_value_info("acc", F, [4])],
        [helper.make_tensor_value_info("c_out", 9, []),
         helper.make_tensor_value_info("acc_out", F, [4])])
    loop = model([helper.make_node("Loop", ["n", "", "x"], ["y"], body=body)],
                 [("x", F, [4])], [("y", F, [4])],
                 [("n", np.array(3, np.int64)), ("w", np.arange(4, dtype=np.float32))])
    shape_chain = model(
        [helper.make_node("Shape", ["x"], ["s"]),
         helper.make_node("Gather", ["s", "i"], ["g"], axis=0),
         helper.make_node("Concat", ["g", "m"], ["c"], axis=0),
         helper.make_node("Reshape", ["x", "c"], ["r"]),
         helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
         helper.make_node("Mul", ["t", "k"], ["y"])],
        [("x", F, [2, 3, 4])], [("y", F, [12, 2])],
        [("i", np.array([0], np.int64)), ("m", np.array([-1], np.int64)),
         numpy_helper.from_array(np.full((12, 2), 0.5, np.float32), "k")])
    consts = model(
        [helper.make_node("Constant", [], ["a"], value_floats=[1.0, 2.0, 3.0]),
         helper.make_node("ConstantOfShape", ["shape"], ["z"],
                          value=numpy_helper.from_array(np.array([2.0], np.float32))),
         helper.make_node("Add", ["a", "z"], ["b"]),
         helper.make_node("Dropout", ["b"], ["d"]),
         helper.make_node("Mul", ["x", "d"], ["y"])],
        [("x", F, [3])], [("y", F, [3])], [("shape", np.array([3], np.int64))])
    return [m.SerializeToString() for m in
            (elementwise_chain(5), if_model(), loop, shape_chain, consts)]


def _fields(msg, out: list) -> list:
    """Every (message, field descriptor) pair under ``msg``, depth first."""
    for fd, value in msg.ListFields():
        out.append((msg, fd))
        if fd.type == fd.TYPE_MESSAGE:
            for sub in (value if fd.is_repeated else [value]):
                _fields(sub, out)
    return out


def mutate_fields(data: bytes, rng: np.random.Generator) -> bytes:
    """Structure-aware: change one field of the parsed model (numbers, names, lists)."""
    import onnx

    m = onnx.ModelProto()
    m.ParseFromString(data)
    fields = _fields(m, [])
    strings = [v for msg, fd in fields if fd.type == fd.TYPE_STRING and
               not fd.is_repeated for v in [getattr(msg, fd.name)]] or ["x"]
    for _ in range(int(rng.integers(1, 3))):
        msg, fd = fields[int(rng.integers(len(fields)))]
        value = getattr(msg, fd.name)
        if fd.is_repeated:
            if len(value) and rng.random() < 0.5:
                del value[int(rng.integers(len(value)))]
            elif len(value) and fd.type != fd.TYPE_MESSAGE:
                value.append(value[int(rng.integers(len(value)))])
            continue
        if fd.type == fd.TYPE_STRING:
            setattr(msg, fd.name, strings[int(rng.integers(len(strings)))])
        elif fd.type in (fd.TYPE_INT64, fd.TYPE_INT32, fd.TYPE_UINT64, fd.TYPE_ENUM):
            choices = [0, 1, -1, 2, value + 1, value - 1, 1 << 31, (1 << 40) + 3]
            v = int(choices[int(rng.integers(len(choices)))])
            if fd.type == fd.TYPE_UINT64:
                v = abs(v)
            try:
                setattr(msg, fd.name, v)
            except (ValueError, TypeError):
                pass
        elif fd.type == fd.TYPE_FLOAT:
            setattr(msg, fd.name, float(rng.choice([0.0, -1.0, 1e30, float("nan")])))
    return m.SerializeToString()


def mutate(data: bytes, others: list[bytes], rng: np.random.Generator) -> bytes:
    if rng.random() < 0.5:
        return mutate_fields(data, rng)
    buf = bytearray(data)
    for _ in range(int(rng.integers(1, 4))):
        if not buf:
            break
        kind = int(rng.integers(6))
        n = len(buf)
        a = int(rng.integers(n))
        b = min(n, a + int(rng.integers(1, 16)))
        if kind == 0:  # truncation
            buf = buf[:a]
        elif kind == 1:  # bit flips
            for _ in range(int(rng.integers(1, 9))):
                i = int(rng.integers(n))
                buf[i] ^= 1 << int(rng.integers(8))
        elif kind == 2:  # overwrite with random or extreme bytes
            fill = rng.choice([0x00, 0xFF, 0x7F, 0x80]) if rng.random() < 0.5 else None
            buf[a:b] = bytes([int(fill)] * (b - a)) if fill is not None else \
                rng.integers(0, 256, b - a, dtype=np.uint8).tobytes()
        elif kind == 3:  # delete a range
            del buf[a:b]
        elif kind == 4:  # splice a chunk of this model elsewhere
            chunk = buf[a:b]
            at = int(rng.integers(n))
            buf[at:at] = chunk
        else:  # splice a chunk of another model in
            other = others[int(rng.integers(len(others)))]
            c = int(rng.integers(len(other)))
            chunk = other[c:c + int(rng.integers(1, 64))]
            buf[a:a + int(rng.integers(0, 8))] = chunk
    return bytes(buf)


def random_feeds(m, rng) -> dict | None:
    feeds = {}
    for spec in m.inputs:
        if spec.dtype is None or spec.shape is None:
            return None
        shape = tuple(d if isinstance(d, int) else 1 for d in spec.shape)
        if any(d < 0 for d in shape) or np.prod(shape, dtype=np.float64) > MAX_INPUT_ELEMENTS:
            return None  # the harness will not build such inputs; not the engine's business
        dt = np.dtype(spec.dtype)
        if dt.kind == "f":
            feeds[spec.name] = rng.standard_normal(shape).astype(dt)
        elif dt.kind in "iu":
            feeds[spec.name] = rng.integers(0, 4, shape).astype(dt)
        elif dt.kind == "b":
            feeds[spec.name] = rng.random(shape) < 0.5
        else:
            return None
    return feeds


def run_case(data: bytes, rng) -> tuple[str, str | None]:
    """('rejected'|'ran'|'run-error'|'skipped', problem or None)."""
    from engine import EngineError, ModelLoader, ModelLoadError, Worker

    try:
        m = ModelLoader.load(data)
    except ModelLoadError:
        return "rejected", None
    except BaseException as exc:  # noqa: BLE001 - this is what the fuzzer looks for
        return "bad-load", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-1500:]}"
    if any(layer.op_type in ("Loop", "Scan") for layer in m.layers):
        return "skipped", None  # a mutated trip count may legitimately run for hours
    feeds = random_feeds(m, rng)
    if feeds is None:
        return "skipped", None
    try:
        with Worker(m) as w:
            w.schedule(feeds)
            for o in m.outputs:
                w.peek_output(o.name).download_to_array()
        return "ran", None
    except EngineError:
        return "run-error", None
    except BaseException as exc:  # noqa: BLE001
        return "bad-run", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-1500:]}"


def main(seed: int, seconds: float) -> None:
    limit = 3 << 30  # big allocations must fail with MemoryError, not take the machine down
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    import engine.backends.cpu  # noqa: F401 - import (and compile) before timing starts

    rng = np.random.default_rng(seed)
    seeds = seed_models()
    counts: dict[str, int] = {}
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        data = mutate(seeds[i % len(seeds)], seeds, rng)
        print(json.dumps({"case": i}), flush=True)
        outcome, problem = run_case(data, rng)
        counts[outcome] = counts.get(outcome, 0) + 1
        if problem:
            print(json.dumps({"problem": problem, "outcome": outcome, "case": i,
                              "data": data.hex()}), flush=True)
        i += 1
    print(json.dumps({"summary": counts, "cases": i, "seed": seed}), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), float(sys.argv[2]))
