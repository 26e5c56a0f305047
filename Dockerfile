# modelgated on Debian 12 (not built in CI). Build: docker build -t modelgate .
# Run: docker run -p 8470:8470 -v modelgate:/var/lib/modelgate modelgate
FROM debian:12 AS build
COPY scripts/install-deps.sh /src/scripts/install-deps.sh
RUN apt-get update && apt-get install -y --no-install-recommends build-essential cmake pkg-config \
      libmicrohttpd-dev libsqlite3-dev libssl-dev libjansson-dev libarchive-dev \
      libcurl4-openssl-dev libcjose-dev libcmocka-dev protobuf-c-compiler libprotobuf-c-dev python3-onnx libcmark-dev && rm -rf /var/lib/apt/lists/*
COPY . /src
RUN cmake -S /src -B /build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMODELGATE_TESTS=OFF \
 && cmake --build /build -j"$(nproc)" && cmake --install /build --prefix /usr/local

FROM debian:12-slim
RUN apt-get update && apt-get install -y --no-install-recommends libmicrohttpd12 libsqlite3-0 \
      libssl3 libjansson4 libarchive13 libcurl4 libcjose0 libprotobuf-c1 libcmark0.30.2 ca-certificates && rm -rf /var/lib/apt/lists/* \
 && useradd --system --home /var/lib/modelgate --shell /usr/sbin/nologin modelgate \
 && install -d -o modelgate -g modelgate -m 0700 /var/lib/modelgate
COPY --from=build /usr/local/bin/modelgated /usr/local/bin/modelgate /usr/local/bin/
USER modelgate
EXPOSE 8470
ENTRYPOINT ["/usr/local/bin/modelgated", "--data-dir", "/var/lib/modelgate", "--listen", "0.0.0.0:8470"]
