# normd container: build on Debian 12, run on a slim Debian 12 with only the runtime
# libraries. CPU backend; listens on 50051.
FROM debian:12 AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/
RUN scripts/install-deps.sh
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DNORMD_TESTS=OFF -DNORMD_CUDA=OFF \
 && cmake --build /build -j "$(nproc)" \
 && cmake --install /build --prefix /opt/normd --strip

FROM debian:12-slim
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      libgrpc++1.51 libprotobuf32 libspdlog1.10 libabsl20220623 libhwy1 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 normd
COPY --from=build /opt/normd/bin/ /usr/local/bin/
USER 10001
EXPOSE 50051
ENTRYPOINT ["/usr/local/bin/normd"]
CMD ["--listen", "0.0.0.0:50051"]
