"""GPU readback (``gpu_common.readback``): one reader thread, reused staging buffers; maps
through direct wgpu-native calls (``rawmap``) and through wgpu-py's API."""

import threading

import numpy as np
import pytest


@pytest.fixture(params=["raw", "public-api"])
def dev(require_gpu, request, monkeypatch):
    from engine.backends.gpu_common import get_device
    from engine.backends.gpu_common.rawmap import RAW_MAP

    device = get_device()
    if request.param == "raw":
        # the direct route exists exactly for the wgpu versions native.py was checked with
        import wgpu

        from engine.backends.gpu_common.native import RAW_VERSIONS

        assert (RAW_MAP is not None) == (wgpu.__version__ in RAW_VERSIONS)
        assert (device.reader._raw is not None) == (RAW_MAP is not None)
    else:
        monkeypatch.setattr(device.reader, "_raw", None)
    return device


def _buffer(dev, data: np.ndarray):
    usage = dev.wgpu.BufferUsage.STORAGE | dev.wgpu.BufferUsage.COPY_SRC
    return dev.device.create_buffer_with_data(data=data.tobytes(), usage=usage)


def test_reads_in_a_row_get_their_own_data_and_reuse_staging(dev, rng):
    """Many reads of buffers of one size, each checked against what was written, with
    reads of another size and odd offsets between them; staging buffers are reused."""
    arrays = [rng.standard_normal(1000).astype(np.float32) for _ in range(6)]
    bufs = [_buffer(dev, a) for a in arrays]
    other = rng.integers(-5, 5, 77).astype(np.int32)
    obuf = _buffer(dev, np.concatenate([np.zeros(3, np.int32), other]))
    created = []
    real = dev.device.create_buffer

    def counting(**kw):
        created.append(kw["size"])
        return real(**kw)

    dev.device.create_buffer = counting
    try:
        for _ in range(3):
            futs = [dev.read_buffer_async(b, a.nbytes, a.dtype, a.shape)
                    for a, b in zip(arrays, bufs)]
            got_other = dev.read_buffer(obuf, other.nbytes, other.dtype, other.shape,
                                        offset=12)
            for f, a in zip(futs, arrays):
                np.testing.assert_array_equal(f.result(timeout=30), a)
            np.testing.assert_array_equal(got_other, other)
    finally:
        del dev.device.create_buffer
    # six reads of 4000 bytes in flight at once need six buffers the first time; later
    # rounds reuse the ones kept (at most KEEP_PER_SIZE a size)
    assert created.count(4000) < 18, created


def test_a_blocking_read_inside_a_readback_callback_does_not_hang(dev, rng):
    """A done-callback runs on the reader thread; a blocking read there must not wait for
    that same thread."""
    a = rng.standard_normal(64).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    ba, bb = _buffer(dev, a), _buffer(dev, b)
    inner: dict = {}
    done = threading.Event()

    def again(_):
        inner["value"] = dev.read_buffer(bb, b.nbytes, b.dtype, b.shape)
        done.set()

    fut = dev.read_buffer_async(ba, a.nbytes, a.dtype, a.shape)
    fut.add_done_callback(again)
    np.testing.assert_array_equal(fut.result(timeout=30), a)
    assert done.wait(30), "the nested read never finished"
    np.testing.assert_array_equal(inner["value"], b)


def test_a_failed_read_reaches_its_future_and_later_reads_still_work(dev, rng):
    """A read whose conversion fails gives its future a GPUError; the reader goes on."""
    from engine.errors import GPUError

    a = rng.standard_normal(16).astype(np.float32)
    buf = _buffer(dev, a)
    staging = dev.reader.staging(a.nbytes)
    enc = dev.device.create_command_encoder()
    enc.copy_buffer_to_buffer(buf, 0, staging, 0, a.nbytes)
    dev.queue.submit([enc.finish()])

    def broken(raw):
        raise ValueError("cannot convert")

    with pytest.raises(GPUError, match="cannot convert"):
        dev.map_staging_async(staging, broken).result(timeout=30)
    np.testing.assert_array_equal(dev.read_buffer(buf, a.nbytes, a.dtype, a.shape), a)


def test_a_map_that_fails_reaches_its_future_and_later_reads_still_work(dev, rng):
    """Mapping a buffer that cannot be mapped (no MAP_READ usage): a GPUError, no hang."""
    from engine.errors import GPUError

    a = rng.standard_normal(16).astype(np.float32)
    buf = _buffer(dev, a)
    # (wgpu-py's map raises at once, a direct map's failure arrives by the future)
    with pytest.raises(GPUError, match="(?i)reading back|readback failed"):
        dev.map_staging_async(buf, lambda raw: np.frombuffer(raw, np.float32).copy()
                              ).result(timeout=30)
    np.testing.assert_array_equal(dev.read_buffer(buf, a.nbytes, a.dtype, a.shape), a)
