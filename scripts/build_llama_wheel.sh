#!/usr/bin/env bash
# Build (once) and install llama-cpp-python into the active Python, with CPU flags that work here.
#
# CPU flags: scripts/llama_build_flags.sh (override with FAITHRAG_LLAMA_CMAKE_ARGS="...").
# Wheels are kept in $FAITHRAG_WHEEL_CACHE (default $FAITHRAG_CACHE/wheels), one folder per
# version, flag set and machine type, so a fresh model cache need not mean a recompile.
set -euo pipefail
. "$(dirname "$0")/llama_build_flags.sh"  # PY, VERSION, WHEEL_CACHE, cmake_args, key
wheel_dir="$WHEEL_CACHE/llama-cpp-python-$VERSION-$key"

if "$PY" -c "import llama_cpp, sys; sys.exit(0 if llama_cpp.__version__ == '$VERSION' else 1)" 2>/dev/null \
   && [ -f "$wheel_dir/.installed-from" ] && "$PY" -c "import sys; print(sys.prefix)" | cmp -s - "$wheel_dir/.installed-from"; then
  echo "llama-cpp-python $VERSION already installed (build $key)"
  exit 0
fi

if ! ls "$wheel_dir"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  echo "Building llama-cpp-python $VERSION (takes ~4 min on 2 cores); CMAKE_ARGS='$cmake_args'"
  mkdir -p "$wheel_dir.tmp"
  CMAKE_ARGS="$cmake_args" CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
    "$PY" -m pip wheel --no-deps --no-cache-dir -w "$wheel_dir.tmp" "llama-cpp-python==$VERSION"
  rm -rf "$wheel_dir" && mv "$wheel_dir.tmp" "$wheel_dir"
fi
"$PY" -m pip install --no-deps --force-reinstall "$wheel_dir"/llama_cpp_python-*.whl
"$PY" -m pip install "$wheel_dir"/llama_cpp_python-*.whl  # its own dependencies (jinja2, diskcache, ...)
"$PY" -c "import sys; print(sys.prefix)" > "$wheel_dir/.installed-from"
echo "llama-cpp-python $VERSION installed from $wheel_dir"
