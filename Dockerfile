# The all-in-one for users who build with Docker (CI builds the same image without a daemon:
# cd deploy/tools && go run ./cmd/buildimage). Static binary, non-root, data in the /data volume,
# works with a read-only root filesystem.
#   docker build --build-arg VERSION=v1.2.3 --build-arg COMMIT=$(git rev-parse HEAD) -t kelemetry:v1.2.3 .
FROM golang:1.26 AS build
ARG VERSION=devel
ARG COMMIT=unknown
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/kelemetry/kelemetry/internal/version.Version=${VERSION} -X github.com/kelemetry/kelemetry/internal/version.Commit=${COMMIT}" \
      -o /out/kelemetry ./cmd/kelemetry \
 && mkdir -p /out/data /out/tmp \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/data:/sbin/nologin\n' > /out/passwd \
 && printf 'root:x:0:\nnonroot:x:65532:\n' > /out/group

FROM scratch
ARG VERSION=devel
ARG COMMIT=unknown
LABEL org.opencontainers.image.title="kelemetry" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.source="https://github.com/kelemetry/kelemetry"
COPY --from=build /out/passwd /etc/passwd
COPY --from=build /out/group /etc/group
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build --chmod=1777 /out/tmp /tmp
COPY --from=build --chown=65532:65532 /out/data /data
COPY --from=build /out/kelemetry /usr/local/bin/kelemetry
USER 65532:65532
WORKDIR /data
ENV HOME=/data
VOLUME /data
EXPOSE 8080 16686
ENTRYPOINT ["/usr/local/bin/kelemetry"]
CMD ["--data-dir=/data", "--audit-addr=:8080", "--http-addr=:16686"]
