#!/usr/bin/env bash
# Build (once) and install llama-cpp-python into the active Python, with CPU flags that work here.
#
# The stock build uses -march=native; on CPUs that report AMX, llama.cpp's AMX buffer type
# segfaults on the first decode (ggml_backend_amx_mul_mat). On such CPUs we build with
# GGML_NATIVE=OFF and the AVX-512 family switched on explicitly (no AMX); on every other CPU
# the native build is kept, so no machine is forced onto slower flags.
# Override with FAITHRAG_LLAMA_CMAKE_ARGS="..." (e.g. "-DGGML_NATIVE=OFF" for a portable wheel).
# Wheels are kept in $FAITHRAG_WHEEL_CACHE (default $FAITHRAG_CACHE/wheels), one folder per
# version, flag set and machine type, so a fresh model cache need not mean a recompile.
set -euo pipefail
PY=${PYTHON:-python}
VERSION=${FAITHRAG_LLAMA_VERSION:-0.3.36}
WHEEL_CACHE=${FAITHRAG_WHEEL_CACHE:-${FAITHRAG_CACHE:-$HOME/.cache/faithrag}/wheels}

if [ -n "${FAITHRAG_LLAMA_CMAKE_ARGS+x}" ]; then
  cmake_args=$FAITHRAG_LLAMA_CMAKE_ARGS
elif grep -qw amx_tile /proc/cpuinfo 2>/dev/null; then
  cmake_args="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AVX_VNNI=ON"
else
  cmake_args=""
fi

key=$(printf '%s|%s|%s' "$VERSION" "$cmake_args" "$(uname -m)" | sha256sum | cut -c1-12)
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
