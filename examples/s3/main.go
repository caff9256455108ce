// Command s3-report is a worked example: a singleton job that publishes a daily report to
// an S3-compatible bucket, fenced by the token of its FencedLease grant. Run it in a
// labeled pod (Cold: FENCING_TOKEN is in its environment; Warm: it waits for the grant).
// Readers take the report through the fence too (s3fence.Fence.Get: the pointer, then
// the content it names). A holder that paused past its lease and wakes after its
// successor published gets fence.ErrStaleToken, and its late report never becomes the
// current one: the pointer's conditional PUT loses, and its content is deleted again.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fencedlease/fencedlease/pkg/fence"
	"github.com/fencedlease/fencedlease/pkg/fence/s3fence"
	"github.com/fencedlease/fencedlease/pkg/holder"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "s3-report:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(ctrl.GetConfigOrDie())
	if err != nil {
		return err
	}
	cfg, err := holder.Config{Leases: holder.ClientGo(cs.CoordinationV1())}.NamesFromEnv()
	if err != nil {
		return err
	}
	h, err := holder.StartWhenGranted(ctx, cfg) // at once in a Cold pod: it was granted before it started
	if err != nil {
		return err
	}
	defer func() { _ = h.Release(context.Background()) }()

	s3, err := minio.New(os.Getenv("S3_ENDPOINT"), &minio.Options{
		Creds:  credentials.NewEnvAWS(), // AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
		Secure: os.Getenv("S3_INSECURE") == "",
	})
	if err != nil {
		return err
	}
	f := &s3fence.Fence{Client: s3, Bucket: os.Getenv("S3_BUCKET")}

	report := fmt.Sprintf("day,invoices\n%s,1234\n", time.Now().UTC().Format("2006-01-02")) // the job's work
	write, cancel := context.WithDeadline(h.Context(), h.Deadline())
	defer cancel()
	err = f.Put(write, "reports/daily.csv", h.Token(), []byte(report), minio.PutObjectOptions{ContentType: "text/csv"})
	if errors.Is(err, fence.ErrStaleToken) {
		return fmt.Errorf("a newer holder published first; this one stops: %w", err)
	}
	return err
}
