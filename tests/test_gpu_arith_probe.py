"""The arithmetic probe decides whether shaders correct their division: only where the
device divides inexactly and its fma is fused (the correction needs an exact remainder)."""

from __future__ import annotations

import pytest

from engine.backends.gpu_common import arith_probe

OVERRIDE_CODE = "override DIV_CORRECTION: bool = false;\nfn f() {}"


class _FakeDevice:
    pass


@pytest.mark.parametrize("exact,fused,want", [
    (False, True, {"DIV_CORRECTION": 1}),
    (False, False, {}),  # an unfused fma's remainder is not exact: the correction would harm
    (True, True, {}),
    (True, False, {}),
])
def test_correction_only_where_needed_and_possible(exact, fused, want, monkeypatch):
    device = _FakeDevice()
    monkeypatch.setitem(arith_probe._results, id(device),
                        (device, {"exact_division": exact, "fused_fma": fused}))
    assert arith_probe.division_constants(device, OVERRIDE_CODE) == want
    # a shader without the override gets no constants (the probe is not even asked)
    assert arith_probe.division_constants(_FakeDevice(), "fn f() {}") == {}


def test_probe_of_the_real_adapter_is_consistent(require_gpu):
    from engine.backends.gpu_common import get_device

    gpu = get_device()
    found = arith_probe.probe(gpu.device)
    assert set(found) == {"exact_division", "fused_fma"}
    assert all(isinstance(v, bool) for v in found.values())
    assert arith_probe.probe(gpu.device) is found  # measured once per device
    want = {"DIV_CORRECTION": 1} if not found["exact_division"] and found["fused_fma"] else {}
    assert arith_probe.division_constants(gpu.device, OVERRIDE_CODE) == want
