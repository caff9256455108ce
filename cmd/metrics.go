package main

import (
	"crypto/tls"
	"flag"

	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// metricsOptions say how /metrics is served. By default over HTTPS, and only to callers
// the API server authenticates (TokenReview) and authorizes (SubjectAccessReview: get on
// the non-resource URL /metrics, which the fencedlease-metrics-reader ClusterRole grants).
type metricsOptions struct {
	secure  bool
	certDir string
	http2   bool
}

func (o *metricsOptions) bind(fs *flag.FlagSet) {
	fs.BoolVar(&o.secure, "metrics-secure", true,
		"Serve /metrics over HTTPS to authenticated, authorized callers only; false serves plain HTTP to anyone who reaches the port.")
	fs.StringVar(&o.certDir, "metrics-cert-dir", "",
		"Folder with tls.crt and tls.key for /metrics (watched for rotation); empty: a self-signed certificate made at start.")
	fs.BoolVar(&o.http2, "metrics-enable-http2", false,
		"Offer HTTP/2 on /metrics. Off by default: HTTP/2's stream handling has had denial-of-service flaws, and a scrape gains nothing from it.")
}

func (o *metricsOptions) server(addr string) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: addr}
	if !o.secure {
		return opts
	}
	opts.SecureServing = true
	opts.FilterProvider = scrapersOnly
	opts.CertDir = o.certDir
	if !o.http2 {
		opts.TLSOpts = append(opts.TLSOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	return opts
}
