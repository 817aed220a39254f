# modelserve: fetchd and serverd with the CPU engine, on Debian 12.
#   docker build -t modelserve:0.1.0 .
#   docker run -p 8000:8000 -v hf-cache:/var/cache/huggingface modelserve:0.1.0 --model Qwen/Qwen3-0.6B
# The GPU image is Dockerfile.cuda. scripts/check-image.sh checks both files (the test suite runs it).

ARG DEBIAN_IMAGE=debian:12-slim

# ---- build: the development packages scripts/install-deps.sh lists for the binaries (no test packages)
FROM ${DEBIAN_IMAGE} AS build
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      cmake g++ ninja-build pkg-config ca-certificates \
      libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc \
      libcurl4-openssl-dev libssl-dev rapidjson-dev liblz4-dev librust-blake3-dev \
      libboost-dev prometheus-cpp-dev libpcre2-dev libutf8proc-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# HTTPS (FETCHD_HTTPS) is on by default: libcurl with OpenSSL reaches https://huggingface.co.
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DENGINE_CUDA=OFF -DBUILD_TESTING=OFF \
 && cmake --build /build --target fetchd serverd \
 && cmake --install /build --prefix /opt/modelserve --strip \
 && scripts/runtime-packages.sh /opt/modelserve/bin/fetchd /opt/modelserve/bin/serverd \
      > /opt/modelserve/runtime-packages.txt

# ---- runtime: the shared libraries the binaries load, the CA certificates for HTTPS, a fixed non-root user
FROM ${DEBIAN_IMAGE}
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates libssl3 libcurl4 \
      libgrpc++1.51 libgrpc29 libprotobuf32 libabsl20220623 libc-ares2 libre2-9 zlib1g \
      liblz4-1 libpcre2-8-0 libutf8proc2 libprometheus-cpp-core1.0 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/modelserve/bin/fetchd /opt/modelserve/bin/serverd /usr/local/bin/
COPY --from=build /opt/modelserve/runtime-packages.txt /usr/local/share/modelserve/runtime-packages.txt
# Fails the build when the list above misses a package the build stage found the binaries to need.
RUN xargs -a /usr/local/share/modelserve/runtime-packages.txt dpkg-query -W -f='${Package} ' \
 && ! ldd /usr/local/bin/fetchd /usr/local/bin/serverd | grep 'not found' \
 && fetchd --version
RUN groupadd --system --gid 10001 modelserve \
 && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin modelserve \
 && mkdir -p /var/cache/huggingface \
 && chown 10001:10001 /var/cache/huggingface
# The Hugging Face cache (HF_HOME/hub); mount a volume here to keep it.
ENV HF_HOME=/var/cache/huggingface
# Numeric, so that Kubernetes' runAsNonRoot can verify it.
USER 10001:10001
EXPOSE 8000
ENTRYPOINT ["serverd"]
CMD ["--help"]
