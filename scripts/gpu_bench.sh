#!/bin/sh
# The command a lent GPU machine runs (issue 33): `bench gpu` from the offline bundle, its report
# written to $OUT. Prepare here, in the repository's root (docs/benchmarks/gpu.md):
#   deno task bundle                                  # dist/sluice-bundle-linux-x86_64.tar.xz, ~31 MiB
#   the Vulkan loader's .deb files in .gl/            # ../.library/device/README.md says how
# then run this through the device tool with carry [".gl", "dist"] and a timeout of 600 s.
set -eu
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -f "$icd" ]; then export VK_DRIVER_FILES="$icd"; fi
tar -xf dist/sluice-bundle-linux-x86_64.tar.xz -C /tmp
export SLUICE_CACHE=/tmp/sluice-cache NO_COLOR=1
cd /tmp/sluice-bundle-linux-x86_64
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >"$OUT/nvidia-smi.txt" 2>&1 || true
./sluice bench gpu 2>"$OUT/gpu-bench.log" >"$OUT/gpu-report.md"
