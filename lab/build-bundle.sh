#!/usr/bin/env bash
# Build an offline bundle of the serving stack (Ray 2.58.0 + vLLM 0.26.0 + NIXL 1.3.1, the versions of
# the Ray LLM DLC image) for a GPU host that already has Python 3.12 and torch 2.11.0+cu130 but no
# package index. Output: OUT/part.00 … (each <= 44 MiB: a device call carries 64 MiB with the working tree), OUT/SHA256, OUT/UNPACK.
# Usage: lab/build-bundle.sh .bundle        (takes ~5 min and ~3 GB of scratch space here)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build-bundle.sh OUTDIR}; mkdir -p "$out"; out=$(cd "$out" && pwd)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
plat=(--platform manylinux2014_x86_64 --platform linux_x86_64)
for n in $(seq 5 39); do plat+=(--platform "manylinux_2_${n}_x86_64"); done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${plat[@]}" -d "$work/wheels" -r "$here/packages.txt"
python3 -m pip install -q --no-deps --no-compile --target "$work/site" \
  --python-version 3.12 --implementation cp "${plat[@]}" --only-binary=:all: "$work"/wheels/*.whl
cd "$work/site"
# Parts the serving path does not load on Hopper, left out to keep the bundle small:
rm -rf vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so \
       vllm/_moe_C_stable_libtorch.abi3.so vllm/vllm-rs \
       vllm/third_party/deep_gemm/include vllm/third_party/fmha_sm100 \
       ray/jars nixl_ep nixl_ep_cu13 nixl_cu13.libs/ucx/libucx_perftest* bin
find vllm/third_party/deep_gemm -name '_C.cpython-3*' ! -name '_C.cpython-312-*' -delete
find . -name '__pycache__' -type d -prune -exec rm -rf {} +
du -sh "$work/site" >&2
# xz makes the fewest parts; gzip (BUNDLE_COMPRESS=gzip) builds in a minute where xz takes half an hour
# on two busy cores, for about a third more bytes. gpu_run.sh unpacks either.
case "${BUNDLE_COMPRESS:-xz}" in
  xz) tar -cf - . | xz -T0 -6 > "$work/bundle.tar" ;;
  gzip) tar -cf - . | gzip -5 > "$work/bundle.tar" ;;
  *) echo "BUNDLE_COMPRESS: xz or gzip" >&2; exit 2 ;;
esac
# 44 MiB a part: a device call carries 64 MiB, the working tree (about 19 MiB) included.
split -b 44m -d "$work/bundle.tar" "$out/part."
(cd "$work" && sha256sum bundle.tar | cut -d' ' -f1) > "$out/SHA256"
cat > "$out/UNPACK" <<'EOT'
# On the GPU host, with all part.* in one folder DIR:
#   cat DIR/part.* > /tmp/bundle.tar && echo "$(cat DIR/SHA256)  /tmp/bundle.tar" | sha256sum -c -
#   mkdir -p /tmp/site && tar -xf /tmp/bundle.tar -C /tmp/site && export PYTHONPATH=/tmp/site
# (tar finds xz or gzip itself; with no xz: python3 -c "import tarfile;tarfile.open('/tmp/bundle.tar').extractall('/tmp/site')")
EOT
ls -la "$out"
