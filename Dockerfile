# sweeper's image: Ray's CUDA image, PyTorch (a CUDA build, with the NCCL it ships) and sweeper
# with its report and nccl extras. Two targets (docs/DEPLOY.md says which fabric each is for):
#
#   docker build -t sweeper:0.1.0 .                      # InfiniBand, RoCE, or one node
#   docker build --target efa -t sweeper:0.1.0-efa .     # AWS EFA: libfabric + aws-ofi-nccl
#   docker tag sweeper:0.1.0 REGISTRY/sweeper:0.1.0 && docker push REGISTRY/sweeper:0.1.0
#
# The RayJobs (jobs/kubernetes/) and the cluster launcher (cluster.yaml) name them.
# Ray's version here must be the cluster's (the RayJob's rayVersion); torch's is the one the
# GPU figures in docs/PERFORMANCE.md were measured with.
#
# Driver: torch 2.11.0's wheel on PyPI is its CUDA 13.0 build (cuda-toolkit 13.0.2, NCCL
# 2.28.9 from nvidia-nccl-cu13), which needs an NVIDIA driver of 580 or newer on every node;
# NVIDIA_REQUIRE_CUDA below makes the NVIDIA container runtime refuse an older one at start.
#
# NCCL's own choices hold: the image sets no NCCL_*, TORCH_* or NVSHMEM_* variable. Machines
# shared with others, where NVLink multicast must stay off, set NCCL_NVLS_ENABLE=0,
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1 in their environment or
# /etc/nccl.conf (docs/DEPLOY.md).
ARG RAY_VERSION=2.60.0
FROM rayproject/ray:${RAY_VERSION}-py311-gpu AS base

ARG TORCH_VERSION=2.11.0
ARG NCCL4PY_VERSION=0.6.0
LABEL org.opencontainers.image.title="sweeper" \
      org.opencontainers.image.description="How fast a GPU cluster really moves data: collective sweeps on Ray into Parquet" \
      org.opencontainers.image.licenses="Apache-2.0"

# Only what the package needs (see .dockerignore): a results directory or a venv in the
# checkout stays out of the image.
COPY --chown=ray:users pyproject.toml README.md LICENSE /home/ray/sweeper/
COPY --chown=ray:users sweeper /home/ray/sweeper/sweeper

# rdma-core's user space (libibverbs and its providers, mlx5's among them): NCCL's own
# InfiniBand and RoCE transport opens it when it starts, and without it falls back to TCP
# sockets. From the base image's Ubuntu release, as the tag above pins it.
USER root
RUN apt-get update \
    && apt-get install -y --no-install-recommends libibverbs1 ibverbs-providers \
    && rm -rf /var/lib/apt/lists/*

USER ray
RUN python -m pip install --no-cache-dir "torch==${TORCH_VERSION}" "nccl4py==${NCCL4PY_VERSION}" \
    && python -m pip install --no-cache-dir "/home/ray/sweeper[report,nccl]" \
    && sweeper --help > /dev/null

ENV NVIDIA_REQUIRE_CUDA="cuda>=13.0"

WORKDIR /home/ray
CMD ["sweeper", "--help"]

# AWS EFA: the EFA installer's user space (libfabric with its efa provider, rdma-core) and
# the aws-ofi-nccl plugin it ships, which NCCL loads from the library path as its network.
# Kept out of the default image: on InfiniBand or RoCE, a plugin on the path would take the
# place of NCCL's own IB transport.
FROM base AS efa
ARG EFA_INSTALLER_VERSION=1.48.0
USER root
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl \
    && cd /tmp \
    && curl -fsSLO "https://efa-installer.amazonaws.com/aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz" \
    && tar -xf "aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz" \
    && cd aws-efa-installer \
    && ./efa_installer.sh -y --skip-kmod --skip-limit-conf --no-verify --disable-build-ngc --disable-ngc \
    && ldconfig \
    && rm -rf /tmp/aws-efa-installer* /var/lib/apt/lists/*
ENV LD_LIBRARY_PATH="/opt/amazon/efa/lib:/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH}"
USER ray

# The default target (a plain `docker build`): the image without EFA's plugin.
FROM base
