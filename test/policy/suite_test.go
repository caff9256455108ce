// Package policy tests the shipped admission policies on a real API server, acting as
// holder pods through impersonation.
package policy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	fencingv1 "github.com/fencedlease/fencedlease/api/v1alpha1"
	"github.com/fencedlease/fencedlease/config/policy"
	"github.com/fencedlease/fencedlease/pkg/fence"
	"github.com/fencedlease/fencedlease/test/testenv"
)

var (
	testEnv *envtest.Environment
	cfg     *rest.Config
	// admin plays the operator: the policies are installed naming it.
	admin client.WithWatch
	ctx   = context.Background()
)

// agentImage is the agent image the parameter names.
const agentImage = "fencedlease-agent:test"

func TestPolicy(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Admission policies (envtest)")
}

var _ = BeforeSuite(func() {
	var err error
	testEnv, cfg, admin, err = testenv.Start()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(testEnv.Stop)

	review := &authenticationv1.SelfSubjectReview{}
	Expect(admin.Create(ctx, review)).To(Succeed())
	operator := review.Status.UserInfo.Username
	Expect(operator).NotTo(BeEmpty())

	root := testenv.RepoRoot()
	Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fencedlease-system"}})).To(Succeed())
	policies, err := policy.Objects(operator, agentImage)
	Expect(err).NotTo(HaveOccurred())
	for _, o := range policies {
		Expect(admin.Create(ctx, o)).To(Succeed())
	}
	install(filepath.Join(root, "config", "rbac", "holder_role.yaml"))
	install(filepath.Join(root, "config", "rbac", "user_roles.yaml"))
	install(filepath.Join(root, "config", "fence"))
	installWidgetCRD()
	// The API server loads new policies asynchronously: wait until each one refuses.
	probe := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Namespace: "default", Name: "probe", Labels: map[string]string{"fencing.fencedlease.io/lease": "probe"},
	}}
	Expect(admin.Create(ctx, probe)).To(Succeed())
	fl := &fencingv1.FencedLease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "probe"}}
	Expect(admin.Create(ctx, fl)).To(Succeed())
	outsider := asUser("probe", "system:masters")
	Eventually(func() error { return outsider.Update(ctx, probe) }).WithTimeout(20 * time.Second).Should(HaveOccurred())
	Eventually(func() error { return outsider.Status().Update(ctx, fl) }).WithTimeout(20 * time.Second).Should(HaveOccurred())
	fenced := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "probe"}}
	fence.Stamp(fenced, 2)
	Expect(admin.Create(ctx, fenced)).To(Succeed())
	Eventually(func() error {
		fence.Stamp(fenced, 1)
		return admin.Update(ctx, fenced)
	}).WithTimeout(20 * time.Second).Should(HaveOccurred())
})

// install creates every object in path (a file, or a folder's YAML files but its
// kustomization).
func install(path string) {
	GinkgoHelper()
	files := []string{path}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		files, _ = filepath.Glob(filepath.Join(path, "*.yaml"))
	}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		raw, err := os.ReadFile(f)
		Expect(err).NotTo(HaveOccurred())
		for _, doc := range strings.Split(string(raw), "\n---\n") {
			obj := map[string]any{}
			Expect(yaml.Unmarshal([]byte(doc), &obj)).To(Succeed())
			if len(obj) == 0 {
				continue
			}
			Expect(admin.Create(ctx, &unstructured.Unstructured{Object: obj})).To(Succeed(), f)
		}
	}
}
