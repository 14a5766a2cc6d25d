"""The project's own model families: ONNX models written the way exporters write them.

Unlike the static zoo, these use symbolic (and anonymous) input dims, run-time shape
subgraphs, masks, ``-1`` reshape targets, recurrent ops and control flow. Each
:class:`Family` builds a deterministic model from a seed, names a "bench" input shape set
and a smaller, different "test" one, and makes realistic inputs (ids in range, padded
masks, audio-like signals). Built files are cached like the zoo's.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx

from engine.families import audio, detection, nlp, speech, vision

#: bump when a build's graph or weights change, so cached files are rebuilt
FORMAT = 2

Shapes = dict[str, tuple[int, ...]]


@dataclass(frozen=True)
class Family:
    """One model family: builder, the two input shape sets, and an input generator."""

    name: str
    build: Callable[[int], onnx.ModelProto]
    bench_shapes: Shapes
    test_shapes: Shapes
    make_inputs: Callable[[Shapes, np.random.Generator], dict[str, np.ndarray]]

    def inputs(self, which: str = "bench",
               rng: np.random.Generator | int = 0) -> dict[str, np.ndarray]:
        """Realistic random inputs for the ``"bench"`` or ``"test"`` shape set."""
        shapes = {"bench": self.bench_shapes, "test": self.test_shapes}[which]
        if not isinstance(rng, np.random.Generator):
            rng = np.random.default_rng(rng)
        return self.make_inputs(shapes, rng)


def _images(name: str, low: float = 0.0, high: float = 1.0):
    def make(shapes: Shapes, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {name: rng.uniform(low, high, shapes[name]).astype(np.float32)}
    return make


def _normal(name: str, std: float = 1.0):
    def make(shapes: Shapes, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {name: (rng.standard_normal(shapes[name]) * std).astype(np.float32)}
    return make


FAMILIES: dict[str, Family] = {f.name: f for f in [
    Family("yolo_detector", detection.build_yolo, {"images": (1, 3, 320, 320)},
           {"images": (2, 3, 64, 96)}, _images("images")),
    Family("db_text_detector", detection.build_db, {"x": (1, 3, 640, 640)},
           {"x": (1, 3, 96, 128)}, _normal("x")),
    Family("crnn_recognizer", detection.build_crnn, {"x": (1, 3, 48, 320)},
           {"x": (2, 3, 48, 64)}, _normal("x")),
    Family("bert_encoder", nlp.build_bert,
           {"input_ids": (1, 128), "attention_mask": (1, 128)},
           {"input_ids": (2, 24), "attention_mask": (2, 24)}, nlp.token_inputs),
    Family("gpt_decoder", nlp.build_gpt, {"input_ids": (1, 64)}, {"input_ids": (2, 12)},
           nlp.token_inputs),
    Family("vit_tiny", vision.build_vit, {"pixel_values": (1, 3, 224, 224)},
           {"pixel_values": (2, 3, 224, 224)}, _normal("pixel_values")),
    Family("audio_streaming", audio.build_audio, audio.BENCH_SHAPES, audio.TEST_SHAPES,
           audio.make_inputs),
    Family("whisper_encoder", speech.build_whisper, {"input_features": (1, 80, 3000)},
           {"input_features": (2, 80, 64)}, speech.make_inputs),
    Family("convnext_cnn", vision.build_convnext, {"images": (1, 3, 224, 224)},
           {"images": (2, 3, 64, 96)}, _normal("images")),
    Family("mobilenetv3_cnn", vision.build_mobilenetv3, {"images": (1, 3, 224, 224)},
           {"images": (2, 3, 96, 128)}, _normal("images")),
]}


def get(name: str) -> Family:
    """The family called ``name`` (a ValueError naming the choices otherwise)."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown model family {name!r}; choose one of "
                         f"{', '.join(FAMILIES)}") from None


def cache_dir() -> str:
    """Folder of built family models (``ENGINE_CACHE_DIR`` or ~/.cache/...)."""
    base = os.environ.get("ENGINE_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "inference-workbench")
    folder = os.path.join(base, "families")
    os.makedirs(folder, exist_ok=True)
    return folder


def path(name: str, seed: int = 0, force: bool = False) -> str:
    """Path of the built ONNX file of family ``name`` (built and cached on first use)."""
    family = get(name)
    out = os.path.join(cache_dir(), f"{name}_seed{seed}_v{FORMAT}.onnx")
    if os.path.exists(out) and not force:
        return out
    model = family.build(seed)
    tmp = out + f".tmp{os.getpid()}"
    onnx.save(model, tmp)
    os.replace(tmp, out)  # atomic: parallel test workers never see half a file
    return out
