"""Build the demo model: a small CNN trained on scikit-learn's 8x8 digits, exported to ONNX.

Training is plain NumPy (im2col convolutions, hand-written backward pass, Adam), so the
script needs no deep-learning framework. The exported model is checked with the ONNX
reference evaluator and its test accuracy is printed. Outputs, all in ``workbench/resources/``:

- ``digits_cnn.onnx``  the model (input ``digit`` float32[1, 1, 8, 8] in [0, 1], ink high;
  output ``probabilities`` float32[1, 10]); its metadata carries the preprocessing recipe
- ``samples/digit_<k>.png`` / ``.npy``  held-out test digits to drop onto the input

Usage: ``python scripts/build_demo_model.py [--epochs N] [--seed S]``
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESOURCES = os.path.join(ROOT, "workbench", "resources")
PREPROCESS = {"color": "gray", "invert": True, "scale": 1 / 255, "mean": [0.0], "std": [1.0],
              "resize": "area", "sample": "samples/digit_3.png"}


# -- layers (NCHW, 3x3 kernels, padding 1) -------------------------------------------------
def im2col(x: np.ndarray) -> np.ndarray:
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    patches = np.stack([xp[:, :, i:i + h, j:j + w] for i in range(3) for j in range(3)], axis=2)
    # (n, c, 9, h, w) -> rows (n, h, w), columns (c, kh, kw) as in ONNX weight order
    return patches.transpose(0, 3, 4, 1, 2).reshape(n * h * w, c * 9)


def col2im(dcols: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    n, c, h, w = shape
    d = dcols.reshape(n, h, w, c, 3, 3)
    dxp = np.zeros((n, c, h + 2, w + 2), dcols.dtype)
    for i in range(3):
        for j in range(3):
            dxp[:, :, i:i + h, j:j + w] += d[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    return dxp[:, :, 1:-1, 1:-1]


def conv_forward(x, weight, bias):
    n, _, h, w = x.shape
    cols = im2col(x)
    out = cols @ weight.reshape(weight.shape[0], -1).T + bias
    return out.reshape(n, h, w, -1).transpose(0, 3, 1, 2), cols


def conv_backward(dout, cols, weight, x_shape):
    d = dout.transpose(0, 2, 3, 1).reshape(-1, weight.shape[0])
    dw = (d.T @ cols).reshape(weight.shape)
    db = d.sum(0)
    dx = col2im(d @ weight.reshape(weight.shape[0], -1), x_shape)
    return dx, dw, db


def pool_forward(x):
    n, c, h, w = x.shape
    r = x.reshape(n, c, h // 2, 2, w // 2, 2)
    out = r.max(axis=(3, 5))
    mask = r == out[:, :, :, None, :, None]
    return out, mask


def pool_backward(dout, mask):
    d = mask * dout[:, :, :, None, :, None]
    n, c, h2, _, w2, _ = d.shape
    return d.reshape(n, c, h2 * 2, w2 * 2)


def forward(p, x):
    c1, cols1 = conv_forward(x, p["w1"], p["b1"])
    r1 = np.maximum(c1, 0)
    p1, m1 = pool_forward(r1)
    c2, cols2 = conv_forward(p1, p["w2"], p["b2"])
    r2 = np.maximum(c2, 0)
    p2, m2 = pool_forward(r2)
    f = p2.reshape(len(x), -1)
    logits = f @ p["wf"].T + p["bf"]
    cache = (x, c1, cols1, m1, p1, c2, cols2, m2, p2, f)
    return logits, cache


def backward(p, cache, dlogits):
    x, c1, cols1, m1, p1, c2, cols2, m2, p2, f = cache
    g = {"wf": dlogits.T @ f, "bf": dlogits.sum(0)}
    dp2 = (dlogits @ p["wf"]).reshape(p2.shape)
    dc2 = pool_backward(dp2, m2) * (c2 > 0)
    dp1, g["w2"], g["b2"] = conv_backward(dc2, cols2, p["w2"], p1.shape)
    dc1 = pool_backward(dp1, m1) * (c1 > 0)
    _, g["w1"], g["b1"] = conv_backward(dc1, cols1, p["w1"], x.shape)
    return g


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def train(x_train, y_train, epochs: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = {
        "w1": rng.normal(0, np.sqrt(2 / 9), (8, 1, 3, 3)), "b1": np.zeros(8),
        "w2": rng.normal(0, np.sqrt(2 / 72), (16, 8, 3, 3)), "b2": np.zeros(16),
        "wf": rng.normal(0, np.sqrt(1 / 64), (10, 64)), "bf": np.zeros(10),
    }
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v = {k: np.zeros_like(v) for k, v in p.items()}
    lr, b1, b2, step = 3e-3, 0.9, 0.999, 0
    for epoch in range(epochs):
        order = rng.permutation(len(x_train))
        for start in range(0, len(order), 32):
            idx = order[start:start + 32]
            logits, cache = forward(p, x_train[idx])
            dlogits = softmax(logits)
            dlogits[np.arange(len(idx)), y_train[idx]] -= 1
            grads = backward(p, cache, dlogits / len(idx))
            step += 1
            for k in p:
                grads[k] = grads[k] + 1e-4 * p[k] * (k[0] == "w")  # light weight decay
                m[k] = b1 * m[k] + (1 - b1) * grads[k]
                v[k] = b2 * v[k] + (1 - b2) * grads[k] ** 2
                mh, vh = m[k] / (1 - b1 ** step), v[k] / (1 - b2 ** step)
                p[k] -= lr * mh / (np.sqrt(vh) + 1e-8)
        if epoch == epochs * 2 // 3:
            lr /= 5
    return p


# -- export --------------------------------------------------------------------------------
def export(p: dict[str, np.ndarray], path: str, accuracy: float) -> onnx.ModelProto:
    def init(name, arr):
        return numpy_helper.from_array(np.asarray(arr, np.float32), name)

    nodes = [
        helper.make_node("Conv", ["digit", "conv1.weight", "conv1.bias"], ["conv1"],
                         name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv1"], ["relu1"], name="relu1"),
        helper.make_node("MaxPool", ["relu1"], ["pool1"], name="pool1",
                         kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["pool1", "conv2.weight", "conv2.bias"], ["conv2"],
                         name="conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv2"], ["relu2"], name="relu2"),
        helper.make_node("MaxPool", ["relu2"], ["pool2"], name="pool2",
                         kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["pool2"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc",
                         transB=1),
        helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax", axis=1),
    ]
    inits = [init("conv1.weight", p["w1"]), init("conv1.bias", p["b1"]),
             init("conv2.weight", p["w2"]), init("conv2.bias", p["b2"]),
             init("fc.weight", p["wf"]), init("fc.bias", p["bf"])]
    graph = helper.make_graph(
        nodes, "digits_cnn",
        [helper.make_tensor_value_info("digit", TensorProto.FLOAT, [1, 1, 8, 8])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [1, 10])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="inference-workbench build_demo_model.py")
    model.ir_version = 8
    model.doc_string = ("Small CNN trained on scikit-learn's 8x8 digits "
                        f"(held-out accuracy {accuracy:.4f}).")
    helper.set_model_props(model, {
        "workbench.preprocess": json.dumps(PREPROCESS),
        "workbench.labels": json.dumps([str(k) for k in range(10)]),
    })
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)
    return model


def write_png_gray(path: str, img: np.ndarray) -> None:
    """Minimal 8-bit grayscale PNG writer (no imaging library needed)."""
    h, w = img.shape
    raw = b"".join(b"\x00" + img[r].astype(np.uint8).tobytes() for r in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
    with open(path, "wb") as f:
        f.write(png)


def write_samples(x_test: np.ndarray, y_test: np.ndarray) -> None:
    out = os.path.join(RESOURCES, "samples")
    os.makedirs(out, exist_ok=True)
    for k in range(10):
        i = int(np.flatnonzero(y_test == k)[0])
        x = x_test[i].astype(np.float32)  # (1, 8, 8) in [0, 1], ink high
        np.save(os.path.join(out, f"digit_{k}.npy"), x[None])
        # dark ink on white, 32x32 like a scanned digit (the app inverts and resizes it)
        img = np.round(255 * (1 - x[0])).repeat(4, 0).repeat(4, 1)
        write_png_gray(os.path.join(out, f"digit_{k}.png"), img)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float64)[:, None]
    x_train, x_test, y_train, y_test = train_test_split(
        x, digits.target, test_size=0.25, random_state=args.seed, stratify=digits.target)
    p = train(x_train, y_train, args.epochs, args.seed)
    acc_numpy = float((forward(p, x_test)[0].argmax(1) == y_test).mean())

    os.makedirs(RESOURCES, exist_ok=True)
    path = os.path.join(RESOURCES, "digits_cnn.onnx")
    export(p, path, acc_numpy)
    from onnx.reference import ReferenceEvaluator

    ref = ReferenceEvaluator(path)
    pred = [int(ref.run(None, {"digit": xi[None].astype(np.float32)})[0].argmax())
            for xi in x_test]
    acc_onnx = float((np.array(pred) == y_test).mean())
    write_samples(x_test, y_test)
    print(f"trained on {len(x_train)} digits, tested on {len(x_test)}")
    print(f"test accuracy: {acc_onnx:.4f} (exported ONNX, reference evaluator); "
          f"{acc_numpy:.4f} (NumPy training graph)")
    print(f"wrote {os.path.relpath(path, ROOT)} ({os.path.getsize(path)} bytes) and samples")


if __name__ == "__main__":
    main()
