#!/usr/bin/env bash
# Build llama.cpp's llama-server from a source tarball, for `accelbench serve` with llama.cpp (the binary is then
# --server-bin BUILD_DIR/build/bin/llama-server, or ACCELBENCH_LLAMA_SERVER).
#
#   benchmarks/build_llama_server.sh [TARBALL] [BUILD_DIR]
#
# TARBALL    llama.cpp-<describe>.tar.xz; default: the first llama.cpp-*.tar.xz in the repository's .vendor/ or .dev/,
#            else ../shared/vendor/ beside the repository.
# BUILD_DIR  default: build/llama.cpp in the repository (ignored by git). The source is unpacked into
#            BUILD_DIR/source, built in BUILD_DIR/build.
#
# CUDA when nvcc is found (PATH or /usr/local/cuda/bin), with the flags verified on an H200 (shared/vendor/README.md)
# and CMAKE_CUDA_ARCHITECTURES from the first GPU's compute capability (nvidia-smi), else 90; a CPU build otherwise.
# LLAMA_BACKEND=cpu or cuda overrides the choice; LLAMA_CUDA_ARCH the architecture; JOBS the parallel jobs (nproc).
# A tarball named llama.cpp-b<N>-<k>-g<commit>.tar.xz (git describe) has no git history: its build number (N + k) and
# commit are given to CMake, so `llama-server --version` and /props say which build runs (else "b0-unknown").
# Idempotent: an existing binary is kept (delete BUILD_DIR/build to rebuild).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tarball="${1:-}"
if [[ -z "$tarball" ]]; then
    for candidate in "$repo"/.vendor/llama.cpp-*.tar.xz "$repo"/.dev/llama.cpp-*.tar.xz \
        "$repo"/../shared/vendor/llama.cpp-*.tar.xz; do
        if [[ -f "$candidate" ]]; then tarball="$candidate"; break; fi
    done
fi
build_dir="${2:-$repo/build/llama.cpp}"
binary="$build_dir/build/bin/llama-server"

if [[ -x "$binary" ]]; then
    echo "llama-server already built: $binary"
    exit 0
fi
if [[ -z "$tarball" || ! -f "$tarball" ]]; then
    echo "error: no llama.cpp source tarball (give its path: $0 TARBALL [BUILD_DIR])" >&2
    exit 2
fi

nvcc_bin="$(command -v nvcc || true)"
cuda_compiler=()  # CMake finds an nvcc on PATH itself
if [[ -z "$nvcc_bin" && -x /usr/local/cuda/bin/nvcc ]]; then
    nvcc_bin=/usr/local/cuda/bin/nvcc
    cuda_compiler=(-DCMAKE_CUDA_COMPILER="$nvcc_bin")
fi
backend="${LLAMA_BACKEND:-$([[ -n "$nvcc_bin" ]] && echo cuda || echo cpu)}"

start=$(date +%s)
mkdir -p "$build_dir"
if [[ ! -f "$build_dir/source/CMakeLists.txt" ]]; then
    rm -rf "$build_dir/source.partial"
    mkdir -p "$build_dir/source.partial"
    tar -xJf "$tarball" -C "$build_dir/source.partial" --strip-components=1
    mv "$build_dir/source.partial" "$build_dir/source"
fi

flags=(-DCMAKE_BUILD_TYPE=Release -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF)
name="$(basename "$tarball")"
if [[ ! -d "$build_dir/source/.git" && "$name" =~ ^llama\.cpp-b([0-9]+)-([0-9]+)-g([0-9a-f]+)\.tar\.xz$ ]]; then
    flags+=(-DLLAMA_BUILD_NUMBER=$((BASH_REMATCH[1] + BASH_REMATCH[2])) -DLLAMA_BUILD_COMMIT="${BASH_REMATCH[3]}")
fi
if [[ "$backend" == cuda ]]; then
    arch="${LLAMA_CUDA_ARCH:-}"
    if [[ -z "$arch" ]] && command -v nvidia-smi >/dev/null; then
        arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .' || true)"
    fi
    arch="${arch:-90}"
    flags+=(-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" -DGGML_CUDA_FA_ALL_QUANTS=OFF "${cuda_compiler[@]}")
fi
command -v ninja >/dev/null && flags+=(-G Ninja)

echo "building llama-server ($backend${arch:+, sm_$arch}) from $name in $build_dir"
cmake -S "$build_dir/source" -B "$build_dir/build" "${flags[@]}"
cmake --build "$build_dir/build" --target llama-server -j "${JOBS:-$(nproc)}"

"$binary" --version 2>&1 | head -1
echo "llama-server built in $(($(date +%s) - start)) s: $binary"
