# syntax=docker/dockerfile:1
#
# vramlab on a CUDA host: the daemon, the CLI and the LibTorch worker in one image.
#
#   docker build -t vramlab .
#   docker run --gpus all -p 127.0.0.1:7433:7433 vramlab --insecure   # or deploy/docker-compose.yml
#
# Three build stages, because the PyTorch wheel's LibTorch exports its own protobuf symbols and
# ships its own protobuf headers (DESIGN.md): the worker is configured as its own CMake tree
# (-DVRAMLAB_BUILD_SERVER=OFF) against the LibTorch inside the official PyTorch image, and the
# daemon and CLI as another tree (-DVRAMLAB_BUILD_WORKER=OFF) against the distribution's
# gRPC/Protobuf/Abseil/prometheus-cpp/SQLite. Ubuntu 24.04 is used for the latter: it has the same
# package versions as Debian bookworm (gRPC 1.51, Protobuf 3.21, Abseil 20220623), which the code
# is written against; the PyTorch images are older Ubuntu releases whose gRPC has no CMake config.
# The runtime is Ubuntu 24.04 too, with the wheel's torch/lib and nvidia/*/lib copied in; a
# worker built on the older glibc of the PyTorch image runs there unchanged.

ARG PYTORCH_IMAGE=pytorch/pytorch:2.7.1-cuda12.8-cudnn9-devel
ARG UBUNTU_IMAGE=ubuntu:24.04

# --- worker: LibTorch from the PyTorch image, nlohmann-json from apt ---------------------------
FROM ${PYTORCH_IMAGE} AS worker-build
# GPU architectures to compile for (LibTorch's own kernels are in the wheel already; this covers
# the worker's own CUDA code paths). 9.0: H100/H200; 8.0/8.6/8.9: A100, RTX 30xx/A6000, L40/4090.
ARG TORCH_CUDA_ARCH_LIST="8.0;8.6;8.9;9.0"
ENV TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build nlohmann-json3-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY cmake cmake
COPY common common
COPY schema schema
COPY proto proto
COPY kernels kernels
COPY worker worker
RUN cmake -S /src -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DVRAMLAB_BUILD_SERVER=OFF -DVRAMLAB_BUILD_TESTS=OFF \
      -DCMAKE_PREFIX_PATH="$(python -c 'import torch; print(torch.utils.cmake_prefix_path)')" \
 && cmake --build /build --target vramlab-worker -j "$(nproc)"
# The shared libraries the worker needs at run time, laid out as in site-packages so that the
# wheel's relative RUNPATHs (torch/lib -> ../../nvidia/*/lib) still resolve.
RUN site=$(python -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))') \
 && mkdir -p /opt/torch-runtime/site-packages/torch \
 && cp -a "$site/torch/lib" /opt/torch-runtime/site-packages/torch/lib \
 && if [ -d "$site/nvidia" ]; then cp -a "$site/nvidia" /opt/torch-runtime/site-packages/nvidia; fi \
 && if [ -d "$site/torch.libs" ]; then cp -a "$site/torch.libs" /opt/torch-runtime/site-packages/; fi \
 && find /opt/torch-runtime -name '*.a' -delete \
 && python -c 'import torch; print(torch.__version__, torch.version.cuda)' > /opt/torch-runtime/VERSION

# --- daemon and CLI: the distribution's gRPC, Protobuf, Abseil, prometheus-cpp, SQLite ---------
FROM ${UBUNTU_IMAGE} AS server-build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev \
      prometheus-cpp-dev libsqlite3-dev nlohmann-json3-dev libcli11-dev python3 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY cmake cmake
COPY common common
COPY schema schema
COPY proto proto
COPY server server
COPY client client
COPY probe probe
RUN cmake -S /src -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DVRAMLAB_BUILD_WORKER=OFF -DVRAMLAB_BUILD_TESTS=OFF \
 && cmake --build /build --target vramlabd vramlab -j "$(nproc)"
# The runtime packages the two binaries load, derived from the binaries themselves so that the
# runtime stage installs exactly those (names differ between releases, e.g. the t64 suffixes).
RUN for lib in $(ldd /build/bin/vramlabd /build/bin/vramlab | awk '/=> \//{print $3}' | sort -u); do \
      dpkg -S "*/$(basename "$lib")" 2>/dev/null | cut -d: -f1; \
    done | sort -u > /build/runtime-packages.txt \
 && cat /build/runtime-packages.txt

# --- runtime ----------------------------------------------------------------------------------
FROM ${UBUNTU_IMAGE} AS runtime
LABEL org.opencontainers.image.title="vramlab" \
      org.opencontainers.image.description="GPU-memory laboratory for LLM fine-tuning: vramlabd, vramlab, vramlab-worker"
# Let the NVIDIA container runtime mount the driver (libcuda, nvidia-smi) into this image.
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
COPY --from=server-build /build/runtime-packages.txt /tmp/runtime-packages.txt
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive xargs -a /tmp/runtime-packages.txt \
      apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt
COPY --from=worker-build /opt/torch-runtime /opt/torch-runtime
# The wheel's libraries on the loader path, for the worker (which was linked against them in
# another filesystem layout) and for libtorch's own dependencies.
RUN { echo /opt/torch-runtime/site-packages/torch/lib; \
      find /opt/torch-runtime/site-packages/nvidia -maxdepth 2 -type d -name lib 2>/dev/null; \
      [ -d /opt/torch-runtime/site-packages/torch.libs ] && echo /opt/torch-runtime/site-packages/torch.libs; \
      true; } > /etc/ld.so.conf.d/vramlab-torch.conf \
 && ldconfig
COPY --from=worker-build /build/bin/vramlab-worker /usr/local/bin/vramlab-worker
COPY --from=server-build /build/bin/vramlabd /build/bin/vramlab /usr/local/bin/
# The command probe, where vramlabd looks for it (bin/../share/vramlab/probe).
COPY --from=server-build /build/probe /usr/local/share/vramlab/probe
# Fail the build, not the first experiment, if a library is missing. libcuda.so.1 comes from the
# host's driver at run time (NVIDIA runtime), so it is the one allowed to be absent here.
RUN missing=$(ldd /usr/local/bin/vramlabd /usr/local/bin/vramlab /usr/local/bin/vramlab-worker \
      | grep 'not found' | grep -v 'libcuda\.so' || true) \
 && if [ -n "$missing" ]; then echo "unresolved libraries:"; echo "$missing"; exit 1; fi
# A fixed, unprivileged uid: the data volume and Kubernetes' runAsUser agree on it.
RUN groupadd --system --gid 10001 vramlab \
 && useradd --system --uid 10001 --gid vramlab --home-dir /var/lib/vramlab --shell /usr/sbin/nologin vramlab \
 && install -d -o vramlab -g vramlab -m 0700 /var/lib/vramlab /var/cache/vramlab
USER vramlab:vramlab
ENV XDG_CACHE_HOME=/var/cache/vramlab \
    CUDA_CACHE_PATH=/var/cache/vramlab/nv
WORKDIR /var/lib/vramlab
VOLUME ["/var/lib/vramlab"]
EXPOSE 7433 9464
# grpc.health.v1 on the API port through the CLI's own health check; unauthenticated by design,
# so no token is needed here.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["/usr/local/bin/vramlab", "--addr", "127.0.0.1:7433", "--timeout", "4s", "server", "--health"]
ENTRYPOINT ["/usr/local/bin/vramlabd", \
            "--listen=0.0.0.0:7433", "--metrics-listen=0.0.0.0:9464", \
            "--data-dir=/var/lib/vramlab", "--device=cuda", \
            "--worker-path=/usr/local/bin/vramlab-worker"]
# Extra flags: --auth-tokens FILE (recommended), or --insecure for a loopback-only port mapping.
CMD []
