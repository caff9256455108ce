# Multi-stage, static, non-root. Two images from one file:
#   make docker-build IMG=... AGENT_IMG=...
#   docker build -t fencedlease .                           the operator (the last stage)
#   docker build --target agent -t fencedlease-agent .      the sidecar and `hold` alone
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
COPY internal/ internal/
COPY pkg/ pkg/
ARG TARGETOS=linux
ARG TARGETARCH=amd64
RUN for b in fencedlease:./cmd fencedlease-agent:./cmd/agent invoice-scheduler:./cmd/invoice-scheduler; do \
      CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
      go build -trimpath -ldflags="-s -w" -o /out/${b%%:*} ${b#*:} || exit 1; \
    done

# The agent image: the webhook injects it as the renewal sidecar, and any image can copy
# its one static binary to run a command under `fencedlease-agent hold -- CMD`.
FROM scratch AS agent
COPY --from=build /out/fencedlease-agent /fencedlease-agent
USER 65532:65532
ENTRYPOINT ["/fencedlease-agent"]

# The operator image. scratch: nothing but static binaries. The API server's CA comes
# from the service account mount, so no system certificate bundle is needed.
FROM scratch AS operator
COPY --from=build /out/fencedlease /fencedlease
# The worked example (config/samples/invoice_scheduler.yaml) ships in the same image.
COPY --from=build /out/invoice-scheduler /invoice-scheduler
USER 65532:65532
ENTRYPOINT ["/fencedlease"]
