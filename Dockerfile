# normd's container image, multi-stage. The CPU image (the default) builds on Debian 12
# and runs on Debian 12 slim. The CUDA image builds and runs on NVIDIA's CUDA images
# (Ubuntu 24.04, whose gRPC, protobuf and Abseil match Debian 12's). Both run the same
# scripts: scripts/container/build.sh, then scripts/container/runtime.sh.
#   podman build --format docker -t normd:0.1.0 .
#   podman build --format docker -t normd:0.1.0-cuda \
#     --build-arg BUILD_BASE=docker.io/nvidia/cuda:12.8.1-devel-ubuntu24.04 \
#     --build-arg RUNTIME_BASE=docker.io/nvidia/cuda:12.8.1-runtime-ubuntu24.04 \
#     --build-arg NORMD_CUDA=ON --build-arg VARIANT=cuda .
# (--format docker keeps HEALTHCHECK, which OCI image configs drop.) The CUDA image is not
# built in this project's CI: no CUDA base image is reachable there.
ARG BUILD_BASE=docker.io/library/debian:12
ARG RUNTIME_BASE=docker.io/library/debian:12-slim

FROM ${BUILD_BASE} AS build
ARG NORMD_CUDA=OFF
WORKDIR /src
COPY scripts/ scripts/
# The dependencies first: their layer outlives source changes.
RUN scripts/install-deps.sh
COPY . .
RUN NORMD_CUDA=${NORMD_CUDA} scripts/container/build.sh /opt/normd

FROM ${RUNTIME_BASE}
ARG VARIANT=cpu
COPY scripts/container/runtime.sh /tmp/runtime.sh
COPY --from=build /opt/normd/runtime-packages.txt /opt/normd/runtime-packages.txt
RUN bash /tmp/runtime.sh /opt/normd && rm /tmp/runtime.sh
COPY --from=build /opt/normd/bin/ /usr/local/bin/
LABEL org.opencontainers.image.title="normd" \
      org.opencontainers.image.description="Normalization layers of deep networks as a gRPC service" \
      org.opencontainers.image.version="0.1.0" \
      io.normd.variant="${VARIANT}"
USER 10001:10001
EXPOSE 50051 9090
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
  CMD ["/usr/local/bin/normctl", "--target", "127.0.0.1:50051", "--timeout-ms", "2000", "health"]
ENTRYPOINT ["/usr/local/bin/normd"]
CMD ["--listen", "0.0.0.0:50051", "--metrics-listen", "0.0.0.0:9090"]
