"""Loading llama.cpp: the AMX workaround switches the extra buffer types off only where it must."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import pytest

from faithrag.llm import llamacpp_runtime


class _ModelParams(ctypes.Structure):
    _fields_ = [("n_gpu_layers", ctypes.c_int32), ("use_extra_bufts", ctypes.c_bool)]


@pytest.mark.parametrize("build_info, cpu_amx, disabled", [
    (b"CPU : AVX512 = 1 | AMX_INT8 = 1 | REPACK = 1 |", True, True),
    (b"CPU : AVX512 = 1 | REPACK = 1 |", True, False),  # our AMX-free build keeps repacking
    (b"CPU : AVX512 = 1 | AMX_INT8 = 1 | REPACK = 1 |", False, False),
])
def test_extra_buffer_types_off_only_for_amx_build_on_amx_cpu(monkeypatch, build_info, cpu_amx,
                                                              disabled):
    monkeypatch.setattr(llamacpp_runtime, "cpu_reports_amx", lambda: cpu_amx)
    params = _ModelParams(0, True)
    lib = SimpleNamespace(llama_print_system_info=lambda: build_info)
    assert llamacpp_runtime.avoid_amx_crash(lib, params) is disabled
    assert params.use_extra_bufts is not disabled
