# sweeper's image: Ray's CUDA image, PyTorch (a CUDA build, with the NCCL it ships) and sweeper
# with its report and nccl extras. The RayJob (jobs/kubernetes/rayjob.yaml) and the cluster
# launcher (cluster.yaml) name it; push it where your nodes pull from:
#
#   docker build -t sweeper:0.1.0 .
#   docker tag sweeper:0.1.0 REGISTRY/sweeper:0.1.0 && docker push REGISTRY/sweeper:0.1.0
#
# Ray's version here must be the cluster's (the RayJob's rayVersion); torch's is the one the
# GPU figures in docs/PERFORMANCE.md were measured with.
ARG RAY_VERSION=2.60.0
FROM rayproject/ray:${RAY_VERSION}-py311-gpu

ARG TORCH_VERSION=2.11.0
LABEL org.opencontainers.image.title="sweeper" \
      org.opencontainers.image.description="How fast a GPU cluster really moves data: collective sweeps on Ray into Parquet" \
      org.opencontainers.image.licenses="Apache-2.0"

# Only what the package needs (see .dockerignore): a results directory or a venv in the
# checkout stays out of the image.
COPY --chown=ray:users pyproject.toml README.md LICENSE /home/ray/sweeper/
COPY --chown=ray:users sweeper /home/ray/sweeper/sweeper

USER ray
RUN python -m pip install --no-cache-dir "torch==${TORCH_VERSION}" \
    && python -m pip install --no-cache-dir "/home/ray/sweeper[report,nccl]" \
    && sweeper --help > /dev/null

# NVLink multicast stays off in every process the image starts, as sweeper's actors set it.
ENV NCCL_NVLS_ENABLE=0 \
    TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
    NVSHMEM_DISABLE_NVLS=1

WORKDIR /home/ray
CMD ["sweeper", "--help"]
