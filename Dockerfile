# Multi-stage, static, non-root. Build: make docker-build IMG=...
FROM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so source edits reuse the module layer.
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
# config/: the CRD, the admission policies and the webhook configuration are embedded.
COPY config/ config/
COPY controllers/ controllers/
COPY pkg/ pkg/
ARG TARGETOS=linux
ARG TARGETARCH=amd64
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w" -o /out/fencedlease ./cmd && \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w" -o /out/invoice-scheduler ./cmd/invoice-scheduler

# scratch: nothing but the static binary. The API server's CA comes from the service
# account mount, so no system certificate bundle is needed.
FROM scratch
COPY --from=build /out/fencedlease /fencedlease
# The worked example (config/samples/invoice_scheduler.yaml) ships in the same image.
COPY --from=build /out/invoice-scheduler /invoice-scheduler
USER 65532:65532
ENTRYPOINT ["/fencedlease"]
