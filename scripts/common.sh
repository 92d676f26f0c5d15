# Shared by scripts/test, scripts/bench and scripts/gpu-check (sourced, not run).

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# nvcc from the PATH, else from the usual toolkit location.
find_nvcc() {
  if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
  command -v nvcc >/dev/null 2>&1 || { echo "error: nvcc (the CUDA toolkit, 12 or 13) is required" >&2; exit 1; }
}

# GoogleTest and Google Benchmark: a staged prefix (.deps/prefix, made by scripts/stage-deps
# for machines without package access), else Debian's packages, installed when missing.
ensure_packages() {
  if [ -d "$repo_root/.deps/prefix" ]; then
    export CMAKE_PREFIX_PATH="$repo_root/.deps/prefix${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
    # Programs built on another machine look for the staged benchmark library here.
    export LD_LIBRARY_PATH="$repo_root/.deps/prefix/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    return
  fi
  local missing=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  [ ${#missing[@]} -eq 0 ] && return
  echo "installing ${missing[*]} from Debian's packages"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

gpu_present() {
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU
}

jobs() { nproc 2>/dev/null || echo 2; }
