"""Loading the embedded llama.cpp backend: the llama-cpp-python import (with the extra's name
when it is missing), the backend's one-time initialisation, the usable cores, and the AMX
workaround (`avoid_amx_crash`)."""

from __future__ import annotations

import os

from faithrag.errors import MissingExtraError

_backend_ready = False


def import_llama_cpp():
    """(llama_cpp, llama_cpp._internals, Jinja2ChatFormatter); MissingExtraError naming the
    `llamacpp` extra when llama-cpp-python cannot be imported."""
    try:
        import llama_cpp
        import llama_cpp._internals as internals
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter
    except ImportError as exc:
        raise MissingExtraError(
            "The embedded llama.cpp backend", "llamacpp",
            f"Importing llama_cpp failed: {exc}. The extra compiles llama.cpp (a few minutes); "
            "in a source checkout `make setup` builds it with flags that work on this CPU.") from exc
    return llama_cpp, internals, Jinja2ChatFormatter


def init_backend(lib) -> None:
    """llama.cpp's backend initialised, once per process."""
    global _backend_ready
    if not _backend_ready:
        lib.llama_backend_init()
        _backend_ready = True


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def cpu_reports_amx() -> bool:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return any(flag.startswith("amx") for flag in line.split())
    except OSError:
        pass
    return False


def avoid_amx_crash(lib, model_params) -> bool:
    """llama.cpp built with AMX segfaults in ggml_backend_amx_mul_mat on some AMX CPUs. The AMX
    code is only reached through the CPU "extra" buffer types, so switch those off when this
    build has AMX compiled in and the CPU reports it. Builds without AMX (scripts/
    build_llama_wheel.sh on AMX CPUs) keep the extra buffer types and their weight repacking."""
    if "use_extra_bufts" not in dict(type(model_params)._fields_):
        return False
    build_has_amx = b"AMX_INT8 = 1" in lib.llama_print_system_info()
    if build_has_amx and cpu_reports_amx():
        model_params.use_extra_bufts = False
        return True
    return False
