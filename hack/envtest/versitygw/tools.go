//go:build tools

// Package tools pins versitygw, the S3-compatible server the S3 fence's tests run.
package tools

import _ "github.com/versity/versitygw/cmd/versitygw"
