#!/usr/bin/env bash
# Build (once) llama.cpp's own OpenAI-compatible server, `llama-server`, from the llama.cpp
# sources that the pinned llama-cpp-python release vendors (the same llama.cpp as the embedded
# backend), statically linked, with the CPU flags of scripts/llama_build_flags.sh. Kept in
# $FAITHRAG_WHEEL_CACHE (default $FAITHRAG_CACHE/wheels) next to the wheel; prints its path,
# which `make test` hands to the tests as $FAITHRAG_LLAMA_SERVER and
# benchmarks/bench_openai_parity.py takes as --llama-server.
set -euo pipefail
. "$(dirname "$0")/llama_build_flags.sh"  # PY, VERSION, WHEEL_CACHE, cmake_args, key
server_dir="$WHEEL_CACHE/llama-server-$VERSION-$key"

if [ ! -x "$server_dir/llama-server" ]; then
  echo "Building llama-server from llama-cpp-python $VERSION's sources (takes ~5 min on 2 cores)" >&2
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  "$PY" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    -d "$work" "llama-cpp-python==$VERSION" >&2
  tar xzf "$work"/llama_cpp_python-*.tar.gz -C "$work"
  src=$(echo "$work"/llama_cpp_python-*/vendor/llama.cpp)
  # shellcheck disable=SC2086  # cmake_args is a list of flags
  cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF $cmake_args >&2
  cmake --build "$work/build" --target llama-server -j "$(nproc)" >&2
  mkdir -p "$server_dir.tmp"
  cp "$work/build/bin/llama-server" "$server_dir.tmp/"
  rm -rf "$server_dir" && mv "$server_dir.tmp" "$server_dir"
  echo "llama-server built in $SECONDS s: $server_dir" >&2
fi
echo "$server_dir/llama-server"
