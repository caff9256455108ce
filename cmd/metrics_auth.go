package main

import (
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// scrapersOnly is the /metrics filter: the bearer token must be one the API server knows
// (TokenReview), and its user must be allowed to get the non-resource URL /metrics
// (SubjectAccessReview); both answers are cached. Unlike controller-runtime's own filter, a
// token the API server rejects is a 401, as the API server itself answers it, not a 500
// with an error logged at every scrape.
func scrapersOnly(cfg *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	cs, err := kubernetes.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, err
	}
	retry := &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
		CacheTTL:                 time.Minute,
		TokenAccessReviewClient:  cs.AuthenticationV1(),
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      retry,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("metrics authentication: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: cs.AuthorizationV1(),
		AllowCacheTTL:             5 * time.Minute,
		DenyCacheTTL:              30 * time.Second,
		WebhookRetryBackoff:       retry,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("metrics authorization: %w", err)
	}
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			res, ok, err := authn.AuthenticateRequest(req)
			if err != nil || !ok {
				log.V(1).Info("scrape refused: not authenticated", "remote", req.RemoteAddr, "error", err)
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			}
			user := res.User
			decision, reason, err := authz.Authorize(req.Context(), authorizer.AttributesRecord{
				User: user, Verb: "get", Path: req.URL.Path, ResourceRequest: false,
			})
			switch {
			case err != nil:
				log.Error(err, "scrape refused: authorization failed", "user", user.GetName())
				http.Error(w, "authorization failed", http.StatusInternalServerError)
			case decision != authorizer.DecisionAllow:
				log.V(1).Info("scrape refused: forbidden", "user", user.GetName(), "reason", reason)
				http.Error(w, fmt.Sprintf("user %q may not get %s", user.GetName(), req.URL.Path), http.StatusForbidden)
			default:
				next.ServeHTTP(w, req)
			}
		}), nil
	}, nil
}
