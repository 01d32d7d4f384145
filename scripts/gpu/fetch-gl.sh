#!/usr/bin/env bash
# Downloads Debian's Vulkan loader and the GL/EGL dispatch libraries NVIDIA's Vulkan driver needs
# into .gl/, with the HTTP library peak links (peak serve, peak mcp --http) and bubblewrap (the
# sandbox of compilers and runners), which a bare GPU host lacks (run on a Debian 12 machine; the GPU scripts unpack them on the GPU host).
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .gl /tmp/peak-amd64/partial
o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/peak-amd64)
apt-get "${o[@]}" update -qq
(cd .gl && apt-get "${o[@]}" download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 \
  libcpp-httplib0.11 bubblewrap)
ls .gl
