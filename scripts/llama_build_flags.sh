# Sourced by build_llama_wheel.sh and build_llama_server.sh: sets PY (the Python, $PYTHON),
# VERSION (llama-cpp-python's, $FAITHRAG_LLAMA_VERSION), WHEEL_CACHE (where builds are kept,
# $FAITHRAG_WHEEL_CACHE, default $FAITHRAG_CACHE/wheels), `cmake_args` (the CPU flags llama.cpp
# is built with) and `key` (version, flags and machine type; names the cache folder).
#
# The stock build uses -march=native; on CPUs that report AMX, llama.cpp's AMX code crashes on
# the first decode (a segfault in ggml_backend_amx_mul_mat in the wheel, an illegal instruction
# in llama-server). On such CPUs we build with GGML_NATIVE=OFF and the AVX-512 family switched
# on explicitly (no AMX); on every other CPU the native build is kept, so no machine is forced
# onto slower flags. Override with FAITHRAG_LLAMA_CMAKE_ARGS="..." (e.g. "-DGGML_NATIVE=OFF"
# for a portable build).
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
